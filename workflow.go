package sundial

import (
	"context"
	"fmt"
	"time"

	"github.com/sundialhq/sundial/internal/workflow"
	"github.com/sundialhq/sundial/pkg/job"
)

// Workflow is a DAG of named steps, each a job, in any queues: a step
// runs once the steps it comes After succeeded (docs/workflows.md). Build
// one with Step, then Submit it in one call:
//
//	wf := sundial.NewWorkflow(sundial.WithID("order-42"))
//	extract := wf.Step("extract", sundial.Job{Type: "extract", Queue: "etl"})
//	load := wf.Step("load", LoadArgs{Table: "orders"}, sundial.After(extract))
//	run, err := wf.Submit(ctx, client)
//
// A Workflow is not safe for concurrent use while it is built.
type Workflow struct {
	id    string
	steps []*Step
}

// Step is a step of a Workflow, as Workflow.Step returns it: name it in
// After to make another step wait for it.
type Step struct {
	wf    *Workflow
	name  string
	job   Args
	after []*Step
}

// Name returns the step's name.
func (s *Step) Name() string { return s.name }

// WorkflowOption configures a Workflow (NewWorkflow).
type WorkflowOption func(*Workflow)

// WithID names the workflow: [A-Za-z0-9_.:@-]{1,128}, e.g. "order-42".
// Each step without an IdempotencyKey of its own gets
// "wf:<id>:<step name>", so that submitting a workflow of the same id
// again (after an error, or from another process) creates only the steps
// not stored yet and answers the others as duplicates, within the queues'
// idempotency window (24 h by default).
func WithID(id string) WorkflowOption { return func(w *Workflow) { w.id = id } }

// NewWorkflow returns an empty workflow. Without WithID its id is a fresh
// ULID: Submit of the same Workflow value twice still stores each step
// once.
func NewWorkflow(opts ...WorkflowOption) *Workflow {
	w := &Workflow{}
	for _, o := range opts {
		o(w)
	}
	if w.id == "" {
		w.id = job.NewID(time.Now())
	}
	return w
}

// ID returns the workflow's id.
func (w *Workflow) ID() string { return w.id }

// StepOption configures a step (Workflow.Step).
type StepOption func(*Step)

// After makes the step wait until steps, of the same workflow, succeeded.
// When one of them ends dead or cancelled the step is cancelled too,
// unless its job's OnDependencyFailure is DependencyRun: then it runs
// anyway.
func After(steps ...*Step) StepOption {
	return func(s *Step) { s.after = append(s.after, steps...) }
}

// Step adds a step named name (unique in the workflow,
// [A-Za-z0-9_.-]{1,64}) that submits a: a Job, or a typed job (Args) as
// Client.Submit takes it. Its job's DependsOn must be empty: steps depend
// on each other through After. Mistakes are reported by Submit.
func (w *Workflow) Step(name string, a Args, opts ...StepOption) *Step {
	s := &Step{wf: w, name: name, job: a}
	for _, o := range opts {
		o(s)
	}
	w.steps = append(w.steps, s)
	return s
}

// StepEndedError is Workflow.Submit's error when a step is not stored
// because a step of its queue that it comes after, stored earlier in the
// same Submit (or by an earlier one), already ended dead or cancelled.
type StepEndedError = workflow.EndedError

// WorkflowRun is a submitted workflow.
type WorkflowRun struct {
	// ID is the workflow's id.
	ID string
	// Steps holds each step's stored job by step name; Duplicate when an
	// earlier submit of the workflow stored it.
	Steps map[string]Submitted
}

// Submit validates every step, then stores the workflow through c (its
// submit middleware sees every step's job).
//
// Nothing is stored when a step is invalid: the error is a
// *job.FieldError naming "steps[i].name", "steps[i].after[j]" (a step
// that is not in the workflow, a cycle) or "steps[i].job.<field>".
//
// The steps are then stored in dependency order: the steps of one queue
// that can go together in one call, all or nothing, and a step that comes
// after a step of another queue once that one is stored. A step may start
// as soon as it is stored: it waits only for the steps it comes after,
// not for the rest of the workflow. When Redis fails midway, the steps already stored
// stay (they run): Submit returns the WorkflowRun of those with the error,
// and a Submit of a workflow with the same id and steps (WithID, or this
// Workflow again) stores the rest without storing any step twice. When a
// stored step ends dead or cancelled before a step of its queue that comes
// after it was stored, that step and those after it are not stored
// (they would have been cancelled), every other step is, and the error is
// a *StepEndedError naming them.
func (w *Workflow) Submit(ctx context.Context, c *Client) (*WorkflowRun, error) {
	now := c.q.Now()
	steps := make([]workflow.Step, len(w.steps))
	for i, s := range w.steps {
		steps[i] = workflow.Step{Name: s.name}
		for j, a := range s.after {
			if a == nil || a.wf != w {
				return nil, &job.FieldError{Field: fmt.Sprintf("steps[%d].after[%d]", i, j),
					Message: fmt.Sprintf("steps[%d].after[%d] must be a step of this workflow", i, j)}
			}
			steps[i].After = append(steps[i].After, a.name)
		}
		if s.job == nil {
			return nil, &job.FieldError{Field: fmt.Sprintf("steps[%d].job", i), Message: fmt.Sprintf("steps[%d].job is required", i)}
		}
		j := asJob(s.job)
		built, err := c.build(ctx, &j, now)
		if err != nil {
			if fe, ok := err.(*job.FieldError); ok {
				return nil, fe.Prefix(fmt.Sprintf("steps[%d].job", i))
			}
			return nil, err
		}
		steps[i].Job, steps[i].OnDependencyFailure = built, j.OnDependencyFailure
	}
	stored, err := workflow.Submit(ctx, c.q, w.id, steps)
	if err != nil && len(stored) == 0 {
		return nil, err
	}
	run := &WorkflowRun{ID: w.id, Steps: make(map[string]Submitted, len(stored))}
	for name, s := range stored {
		run.Steps[name] = Submitted{Job: s.Job, Duplicate: s.Duplicate}
	}
	return run, err
}
