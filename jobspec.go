package sundial

import "github.com/sundialhq/sundial/pkg/job"

// Spec returns the engine's submit spec of j, for packages that store a job
// elsewhere before it reaches Redis (the outboxes of sundialpg and
// sundialmongo). The error is one of the payload's encoding.
func (j Job) Spec() (job.Spec, error) { return j.spec() }
