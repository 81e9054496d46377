package workflow

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sundialhq/sundial/pkg/job"
)

// step is a step named name in queue q, after the steps named.
func step(name, q string, after ...string) Step {
	return Step{Name: name, Job: &job.Job{Queue: q, Type: "t"}, After: after}
}

// TestPlan: the submit calls a workflow takes, in order, by step name.
func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []Step
		calls [][]string
	}{
		{"one queue, three levels", []Step{step("a", "q"), step("b", "q", "a"), step("c", "q", "a"), step("d", "q", "b", "c")},
			[][]string{{"a", "b", "c", "d"}}},
		{"after names later steps", []Step{step("d", "q", "b", "c"), step("c", "q", "a"), step("b", "q", "a"), step("a", "q")},
			[][]string{{"a", "b", "c", "d"}}},
		{"two queues", []Step{step("a", "q1"), step("b", "q2", "a"), step("c", "q2", "b"), step("d", "q1")},
			[][]string{{"a", "d"}, {"b", "c"}}},
		{"back to the first queue", []Step{step("a", "q1"), step("b", "q2", "a"), step("c", "q1", "a", "b"), step("d", "q1", "a")},
			[][]string{{"a", "d"}, {"b"}, {"c"}}},
		{"three queues, independent roots", []Step{step("a", "q1"), step("b", "q2"), step("c", "q3", "a", "b"), step("e", "q3")},
			[][]string{{"a"}, {"b"}, {"e"}, {"c"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, err := plan("w", tc.steps)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]string
			for _, call := range calls {
				var names []string
				for _, i := range call {
					names = append(names, tc.steps[i].Name)
				}
				got = append(got, names)
			}
			if !reflect.DeepEqual(got, tc.calls) {
				t.Fatalf("calls %v, want %v", got, tc.calls)
			}
		})
	}
}

// TestCheck: the mistakes Check finds, by the field it names.
func TestCheck(t *testing.T) {
	withDeps := step("b", "q")
	withDeps.Job.DependsOn = []string{"x"}
	for _, tc := range []struct {
		name, id string
		steps    []Step
		field    string
	}{
		{"bad id", "a b", []Step{step("a", "q")}, "id"},
		{"no steps", "w", nil, "steps"},
		{"bad name", "w", []Step{step("", "q")}, "steps[0].name"},
		{"name twice", "w", []Step{step("a", "q"), step("a", "q")}, "steps[1].name"},
		{"no job", "w", []Step{{Name: "a"}}, "steps[0].job"},
		{"depends_on", "w", []Step{step("a", "q"), withDeps}, "steps[1].job.depends_on"},
		{"unknown", "w", []Step{step("a", "q", "x")}, "steps[0].after[0]"},
		{"itself", "w", []Step{step("a", "q", "a")}, "steps[0].after[0]"},
		{"twice", "w", []Step{step("a", "q"), step("b", "q", "a", "a")}, "steps[1].after[1]"},
		{"cycle of two", "w", []Step{step("a", "q", "b"), step("b", "q2", "a")}, "steps[1].after[0]"},
		{"cycle below a root", "w", []Step{step("r", "q"), step("a", "q", "r", "c"), step("b", "q", "a"), step("c", "q", "b")}, "steps[2].after[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.id, tc.steps)
			var fe *job.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("got %v, want an error of %s", err, tc.field)
			}
			t.Log(err)
		})
	}
	if len(IdempotencyKey(string(make([]byte, 128)), string(make([]byte, 64)))) > job.MaxIdempotencyKeyLen {
		t.Fatal("a step's key can be too long")
	}
}
