// Package deploycheck proves Sundial's deploy files offline, with no Docker
// engine and no Kubernetes: its tests parse and lint the Dockerfile, load
// docker-compose.yml as Docker Compose does, render the Helm chart with each
// set of values, decode every manifest strictly against the Kubernetes API
// types, and run the environment each service would see through
// pkg/config's validation. It is its own module because compose-go,
// client-go and BuildKit's Dockerfile parser are heavy (docs/deploy.md).
package deploycheck
