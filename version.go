package sundial

import "github.com/sundialhq/sundial/internal/buildinfo"

// Version is the Sundial release this module is (semantic versioning; see
// CHANGELOG.md and docs/upgrading.md), the one every binary prints.
var Version = buildinfo.Version
