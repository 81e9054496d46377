package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Graph limits: how many jobs GET /v1/jobs/{id}/graph returns.
const (
	defaultGraphNodes = 100
	maxGraphNodes     = 500
)

// graphNode is one job of a dependency graph: what the dashboard draws.
type graphNode struct {
	ID    string    `json:"id"`
	Queue string    `json:"queue,omitempty"`
	Type  string    `json:"type,omitempty"`
	State job.State `json:"state,omitempty"`
	// Attempt and the idempotency key (a workflow step's is
	// "wf:<workflow>:<step>") say which run and which step it is.
	Attempt        int    `json:"attempt"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	CreatedAt      msTime `json:"created_at,omitzero"`
	FinishedAt     msTime `json:"finished_at,omitzero"`
	// Missing: a job named by an edge that neither Redis nor the history
	// store knows (pruned from both, or never there).
	Missing bool `json:"missing,omitempty"`
}

// graphEdge says that job To waits for (depends on) job From.
type graphEdge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// jobGraph is the answer of GET /v1/jobs/{id}/graph.
type jobGraph struct {
	Root  string      `json:"root"`
	Nodes []graphNode `json:"nodes"`
	Edges []graphEdge `json:"edges"`
	// Truncated: the graph has more jobs than the limit; the nodes are the
	// nearest to the root.
	Truncated bool `json:"truncated"`
}

// jobGraph handles GET /v1/jobs/{id}/graph: the jobs connected to job id
// by dependencies, both ways, nearest first (a breadth-first walk), up to
// limit jobs. A job's parents are its depends_on; its children are the
// jobs of its queue that still wait for it (Redis) and, with a history
// store, every job recorded as depending on it, in any queue.
func (s *Server) jobGraph(c *gin.Context) {
	if err := checkQuery(c, "limit"); err != nil {
		fail(c, err)
		return
	}
	limit := defaultGraphNodes
	if v, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxGraphNodes {
			fail(c, invalid("limit", "limit must be a whole number between 1 and %d", maxGraphNodes))
			return
		}
		limit = n
	}
	ctx := c.Request.Context()
	root := c.Param("id")
	first, err := s.graphJob(ctx, root)
	if err != nil {
		fail(c, err)
		return
	}
	if first == nil {
		fail(c, queue.ErrNotFound)
		return
	}
	g := jobGraph{Root: root, Nodes: []graphNode{}, Edges: []graphEdge{}}
	seen := map[string]bool{root: true}
	edges := map[graphEdge]bool{}
	addEdge := func(e graphEdge) {
		if !edges[e] {
			edges[e] = true
			g.Edges = append(g.Edges, e)
		}
	}
	type visit struct {
		id string
		j  *job.Job // nil: not found
	}
	next := []visit{{root, first}}
	deps := s.q.NewDependentsReader()
	for len(next) > 0 {
		v := next[0]
		next = next[1:]
		if v.j == nil {
			g.Nodes = append(g.Nodes, graphNode{ID: v.id, Missing: true})
			continue
		}
		g.Nodes = append(g.Nodes, nodeOf(v.j))
		children, err := s.dependents(ctx, deps, v.j)
		if err != nil {
			fail(c, err)
			return
		}
		var near []string
		for _, d := range v.j.DependsOn {
			p := depID(d)
			addEdge(graphEdge{From: p, To: v.id})
			near = append(near, p)
		}
		for _, ch := range children {
			addEdge(graphEdge{From: v.id, To: ch})
			near = append(near, ch)
		}
		for _, n := range near {
			if seen[n] {
				continue
			}
			if len(seen) >= limit {
				g.Truncated = true
				continue
			}
			seen[n] = true
			j, err := s.graphJob(ctx, n)
			if err != nil {
				fail(c, err)
				return
			}
			next = append(next, visit{n, j})
		}
	}
	// Only edges between the jobs returned.
	kept := g.Edges[:0]
	for _, e := range g.Edges {
		if seen[e.From] && seen[e.To] {
			kept = append(kept, e)
		}
	}
	g.Edges = kept
	c.JSON(http.StatusOK, g)
}

// graphJob returns job id from Redis, else from the history store, or nil
// when neither has it.
func (s *Server) graphJob(ctx context.Context, id string) (*job.Job, error) {
	j, err := s.q.Get(ctx, id)
	if errors.Is(err, queue.ErrNotFound) {
		if s.cfg.History == nil {
			return nil, nil
		}
		j, err = s.cfg.History.Job(ctx, id)
		if errors.Is(err, history.ErrNotFound) {
			return nil, nil
		}
		err = historyErr(err)
	}
	return j, err
}

// dependents returns the ids of the jobs that wait for j: Redis' edges not
// yet settled, and the history store's record of every job that named it.
func (s *Server) dependents(ctx context.Context, deps *queue.DependentsReader, j *job.Job) ([]string, error) {
	ids, err := deps.Dependents(ctx, j.Queue, j.ID)
	if err != nil {
		return nil, err
	}
	if s.cfg.History == nil {
		return ids, nil
	}
	found, _, err := s.cfg.History.Search(ctx, history.Query{
		DependsOn: []string{j.ID, j.Queue + "|" + j.ID}, Limit: history.MaxLimit,
	})
	if err != nil {
		return nil, historyErr(err)
	}
	for _, d := range found {
		ids = append(ids, d.ID)
	}
	return ids, nil
}

// depID is the job id of a depends_on entry ("<queue>|<id>" names a job of
// another queue).
func depID(d string) string {
	if _, id, ok := strings.Cut(d, "|"); ok {
		return id
	}
	return d
}

func nodeOf(j *job.Job) graphNode {
	n := graphNode{ID: j.ID, Queue: j.Queue, Type: j.Type, State: j.State, Attempt: j.Attempt,
		IdempotencyKey: j.IdempotencyKey, CreatedAt: msTime(j.CreatedAt)}
	if j.FinishedAt != nil {
		n.FinishedAt = msTime(*j.FinishedAt)
	}
	return n
}
