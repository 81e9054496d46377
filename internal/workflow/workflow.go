// Package workflow checks, orders and stores a workflow: a DAG of named
// steps, each a job, that may span queues. It is the one implementation
// behind sundial.Workflow and POST /v1/workflows; the callers build and
// validate each step's job their own way (middleware, type defaults) and
// hand the built jobs here.
package workflow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Limits of a workflow.
const (
	// MaxSteps is the most steps one workflow may have.
	MaxSteps = 1000
	// MaxAfter is the most steps one step may run after (a job's
	// dependency limit).
	MaxAfter = job.MaxDependencies
)

var (
	idChars   = job.NewCharset("A-Za-z0-9_.:@-")
	nameChars = job.NewCharset("A-Za-z0-9_.-")
)

// ValidID reports whether id is a valid workflow id: [A-Za-z0-9_.:@-]{1,128}.
func ValidID(id string) bool { return idChars.Match(id, 128) }

// ValidName reports whether name is a valid step name: [A-Za-z0-9_.-]{1,64}.
func ValidName(name string) bool { return nameChars.Match(name, 64) }

// IdempotencyKey is the key a step without its own gets: a retry of the
// workflow with the same id finds the step's job instead of storing it
// twice. At most 3+128+1+64 bytes, under job.MaxIdempotencyKeyLen.
func IdempotencyKey(id, step string) string { return "wf:" + id + ":" + step }

// Step is one step of a workflow.
type Step struct {
	// Name is unique within the workflow.
	Name string
	// Job is the step's job, built and validated (job.Spec.Build); its
	// DependsOn must be empty: a step depends on other steps through
	// After. Submit sets its DependsOn, and its IdempotencyKey when empty.
	Job *job.Job
	// After names the steps that must succeed first.
	After []string
	// OnDependencyFailure is the job's policy (job.Spec's, checked by its
	// Build, which keeps it only on a job with dependencies): with
	// job.DependencyRun the step runs when a step of After ends dead or
	// cancelled, instead of being cancelled.
	OnDependencyFailure string
}

// Check validates a workflow without storing anything: id, step names
// (unique), After (known steps, no repeats, no cycles) and the limits. The
// error is a *job.FieldError naming "id", "steps", "steps[i].name",
// "steps[i].after[j]" or "steps[i].job.depends_on".
func Check(id string, steps []Step) error {
	_, err := plan(id, steps)
	return err
}

// EndedError says that a step could not be stored because a step it runs
// after, of the same queue and stored by an earlier call of the same
// Submit (or an earlier Submit), already ended dead or cancelled: the
// workflow failed before it was whole. That step and the steps after it
// are not stored (they would have been cancelled); every other step is.
type EndedError struct {
	// Step could not be stored: After had ended State.
	Step, After, State string
	// Skipped names the steps not stored: Step, the steps after it, and
	// those of any other step refused the same way.
	Skipped []string
}

func (e *EndedError) Error() string {
	return fmt.Sprintf("workflow: step %q not stored: step %q, which it runs after, already ended %s; not stored: %s",
		e.Step, e.After, e.State, strings.Join(e.Skipped, ", "))
}

// Submit checks the workflow (Check), then stores its steps in dependency
// order: the steps of one queue that can go together in one queue.Submit
// call (all or nothing, depending on each other as "#n"), and a step that
// runs after a step of another queue only once that step is stored. It
// returns the stored jobs by step name; on an error after the first call,
// the steps stored so far (they stay stored). An *EndedError comes with
// every step stored but those it names. A step without an
// idempotency key gets IdempotencyKey(id, name), so that Submit again with
// the same id and steps stores only what is missing.
func Submit(ctx context.Context, q *queue.Client, id string, steps []Step) (map[string]queue.Submitted, error) {
	calls, err := plan(id, steps)
	if err != nil {
		return nil, err
	}
	index := make(map[string]int, len(steps))
	children := make([][]int, len(steps))
	for i, s := range steps {
		index[s.Name] = i
	}
	for i, s := range steps {
		for _, a := range s.After {
			children[index[a]] = append(children[index[a]], i)
		}
	}
	var ended *EndedError
	skipped := make([]bool, len(steps))
	var skip func(i int)
	skip = func(i int) {
		if skipped[i] {
			return
		}
		skipped[i] = true
		ended.Skipped = append(ended.Skipped, steps[i].Name)
		for _, c := range children[i] {
			skip(c)
		}
	}
	stored := make(map[string]queue.Submitted, len(steps))
	for _, all := range calls {
		for {
			var call []int
			for _, i := range all {
				if !skipped[i] {
					call = append(call, i)
				}
			}
			if len(call) == 0 {
				break
			}
			res, err := q.Submit(ctx, callJobs(id, steps, index, call, stored))
			if err == nil {
				for n, i := range call {
					stored[steps[i].Name] = res[n]
				}
				break
			}
			var de *queue.DependencyError
			if !errors.As(err, &de) || de.Reason != "failed" || de.Index >= len(call) || de.Dep >= len(steps[call[de.Index]].After) {
				return stored, fmt.Errorf("workflow: storing step %q: %w", steps[call[0]].Name, err)
			}
			// The call stored nothing: store it again without the step and
			// the steps after it.
			s := steps[call[de.Index]]
			if ended == nil {
				ended = &EndedError{Step: s.Name, After: s.After[de.Dep], State: de.Detail}
			}
			skip(call[de.Index])
		}
	}
	if ended != nil {
		return stored, ended
	}
	return stored, nil
}

// callJobs returns the jobs of the steps of call, in its order, each
// depending on the steps it comes after: "#n" for the call's n-th, the
// stored job's id for an earlier call's.
func callJobs(id string, steps []Step, index map[string]int, call []int, stored map[string]queue.Submitted) []*job.Job {
	pos := make(map[int]int, len(call)) // step index → place in the call
	jobs := make([]*job.Job, len(call))
	for n, i := range call {
		pos[i] = n
		s := steps[i]
		j := s.Job
		if j.IdempotencyKey == "" {
			j.IdempotencyKey = IdempotencyKey(id, s.Name)
		}
		j.DependsOn = nil
		for _, a := range s.After {
			if p, ok := pos[index[a]]; ok {
				j.DependsOn = append(j.DependsOn, "#"+strconv.Itoa(p))
			} else {
				j.DependsOn = append(j.DependsOn, stored[a].Job.ID)
			}
		}
		if len(j.DependsOn) > 0 {
			j.State = job.Waiting
			if s.OnDependencyFailure == job.DependencyRun {
				j.OnDependencyFailure = job.DependencyRun
			}
		}
		jobs[n] = j
	}
	return jobs
}

// plan checks the workflow and returns its submit calls, in order: each a
// list of step indexes of one queue, every step after the steps it runs
// after. A step's stage is how many changes of queue lead to it; the
// steps of one stage and queue go in one call.
func plan(id string, steps []Step) ([][]int, error) {
	if !ValidID(id) {
		return nil, fieldErr("id", "must match [A-Za-z0-9_.:@-]{1,128}")
	}
	if len(steps) == 0 || len(steps) > MaxSteps {
		return nil, fieldErr("steps", "must hold between 1 and %d steps, not %d", MaxSteps, len(steps))
	}
	index := make(map[string]int, len(steps))
	for i, s := range steps {
		f := fmt.Sprintf("steps[%d].name", i)
		if !ValidName(s.Name) {
			return nil, fieldErr(f, "must match [A-Za-z0-9_.-]{1,64}")
		}
		if first, ok := index[s.Name]; ok {
			return nil, fieldErr(f, "%q is the name of steps[%d] already", s.Name, first)
		}
		index[s.Name] = i
		if s.Job == nil {
			return nil, fieldErr(fmt.Sprintf("steps[%d].job", i), "is required")
		}
		if len(s.Job.DependsOn) > 0 {
			return nil, fieldErr(fmt.Sprintf("steps[%d].job.depends_on", i), "must be empty: a step runs after other steps through after")
		}
	}
	for i, s := range steps {
		if len(s.After) > MaxAfter {
			return nil, fieldErr(fmt.Sprintf("steps[%d].after", i), "may name at most %d steps", MaxAfter)
		}
		seen := make(map[string]bool, len(s.After))
		for j, a := range s.After {
			f := fmt.Sprintf("steps[%d].after[%d]", i, j)
			switch d, ok := index[a]; {
			case !ok:
				return nil, fieldErr(f, "names no step of the workflow: %q", a)
			case d == i:
				return nil, fieldErr(f, "names the step itself")
			case seen[a]:
				return nil, fieldErr(f, "names %q twice", a)
			}
			seen[a] = true
		}
	}
	order, err := topoOrder(steps, index)
	if err != nil {
		return nil, err
	}
	stage := make([]int, len(steps))
	for _, i := range order {
		for _, a := range steps[i].After {
			d := index[a]
			st := stage[d]
			if steps[d].Job.Queue != steps[i].Job.Queue {
				st++
			}
			stage[i] = max(stage[i], st)
		}
	}
	type callKey struct {
		stage int
		queue string
	}
	var keys []callKey
	groups := map[callKey][]int{}
	for _, i := range order {
		k := callKey{stage[i], steps[i].Job.Queue}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	// By stage, then in the order the calls first appear: a call's steps
	// run only after steps of lower stages.
	var calls [][]int
	for st := 0; len(calls) < len(keys); st++ {
		for _, k := range keys {
			if k.stage == st {
				calls = append(calls, groups[k])
			}
		}
	}
	return calls, nil
}

// topoOrder returns the step indexes with every step after the steps it
// runs after, in the order given where the graph leaves the choice; a
// cycle is an error naming the edge that closes it.
func topoOrder(steps []Step, index map[string]int) ([]int, error) {
	const (
		unseen = iota
		open
		done
	)
	mark := make([]int, len(steps))
	order := make([]int, 0, len(steps))
	var path []int
	var visit func(i int) error
	visit = func(i int) error {
		mark[i] = open
		path = append(path, i)
		for j, a := range steps[i].After {
			d := index[a]
			switch mark[d] {
			case open:
				var names []string
				for k := len(path) - 1; k >= 0; k-- {
					names = append(names, strconv.Quote(steps[path[k]].Name))
					if path[k] == d {
						break
					}
				}
				names = append([]string{strconv.Quote(steps[d].Name)}, names...)
				return fieldErr(fmt.Sprintf("steps[%d].after[%d]", i, j), "makes a cycle: %s", strings.Join(reverse(names), " after "))
			case unseen:
				if err := visit(d); err != nil {
					return err
				}
			}
		}
		path = path[:len(path)-1]
		mark[i] = done
		order = append(order, i)
		return nil
	}
	for i := range steps {
		if mark[i] == unseen {
			if err := visit(i); err != nil {
				return nil, err
			}
		}
	}
	return order, nil
}

func reverse(s []string) []string {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
	return s
}

func fieldErr(field, format string, args ...any) *job.FieldError {
	return &job.FieldError{Field: field, Message: field + " " + fmt.Sprintf(format, args...)}
}
