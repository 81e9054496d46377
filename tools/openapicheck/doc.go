// Package openapicheck proves the API's OpenAPI document with an
// independent OpenAPI 3.1 validator (pb33f/libopenapi-validator): the
// document a running API serves must be valid, and real exchanges with
// that API — successes and errors, over a real redis-server — must match
// it, requests and answers alike. It is its own module because the
// validator brings nine modules and newer golang.org/x/net and x/text
// than the root module needs, which every program importing the sundial
// package would then have to take; a test does not justify that.
package openapicheck
