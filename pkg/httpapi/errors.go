package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/schedule"
)

// The error codes of the API (docs/api.md), each with one HTTP status.
const (
	codeInvalidArgument      = "invalid_argument"       // 400
	codeUnauthenticated      = "unauthenticated"        // 401
	codePermissionDenied     = "permission_denied"      // 403: a websocket from a foreign origin
	codeNotFound             = "not_found"              // 404
	codeConflict             = "conflict"               // 409
	codePayloadTooLarge      = "payload_too_large"      // 413
	codeUnsupportedMediaType = "unsupported_media_type" // 415
	codeRateLimited          = "rate_limited"           // 429
	codeInternal             = "internal"               // 500
	codeUnavailable          = "unavailable"            // 503
)

// apiError is an error that already is an answer of the API.
type apiError struct {
	Status  int
	Code    string
	Message string
	Field   string
}

func (e *apiError) Error() string { return e.Message }

func invalid(field, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: codeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

// errorBody is the one shape of every error response.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// Errors of this package that the table maps.
var (
	errNoHistory = errors.New("history store not configured")
)

// historyError marks an error of the history store that is not one of its
// sentinel errors: the store is down or misbehaving.
type historyError struct{ err error }

func (e *historyError) Error() string { return "history: " + e.err.Error() }
func (e *historyError) Unwrap() error { return e.err }

// batchError marks an error of a batch submission, so that dependency
// errors name "jobs[i].depends_on[d]".
type batchError struct{ err error }

func (e *batchError) Error() string { return e.err.Error() }
func (e *batchError) Unwrap() error { return e.err }

// errorTable translates errors of the engine, the history store and the
// HTTP layer into API errors. It is the only place that does; the first
// matching row wins, and an error no row matches is a 500 whose cause is
// logged but never shown.
var errorTable = []struct {
	match func(error) bool
	to    func(error) *apiError
}{
	{asType[*apiError], func(err error) *apiError { e, _ := asErr[*apiError](err); return e }},
	{asType[*job.FieldError], func(err error) *apiError {
		e, _ := asErr[*job.FieldError](err)
		return invalid(e.Field, "%s", e.Message)
	}},
	{asType[*queue.DependencyError], func(err error) *apiError {
		e, _ := asErr[*queue.DependencyError](err)
		field := e.Field(asType[*batchError](err))
		return invalid(field, "%s: %s", field, e.Error())
	}},
	{asType[*queue.MixedBatchError], func(err error) *apiError {
		e, _ := asErr[*queue.MixedBatchError](err)
		field := fmt.Sprintf("jobs[%d].queue", e.Index)
		return invalid(field, "%s: %s", field, e.Error())
	}},
	{asType[*http.MaxBytesError], func(err error) *apiError {
		e, _ := asErr[*http.MaxBytesError](err)
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: codePayloadTooLarge, Message: fmt.Sprintf("request body exceeds %d bytes", e.Limit)}
	}},
	{is(schedule.ErrNotFound), func(error) *apiError {
		return &apiError{Status: http.StatusNotFound, Code: codeNotFound, Message: "schedule not found"}
	}},
	{is(schedule.ErrBusy), func(err error) *apiError {
		return &apiError{Status: http.StatusConflict, Code: codeConflict, Message: err.Error()}
	}},
	{is(queue.ErrLimitNotFound), func(error) *apiError {
		return &apiError{Status: http.StatusNotFound, Code: codeNotFound, Message: "limit not found"}
	}},
	{is(queue.ErrTooManyLimits), func(err error) *apiError {
		return &apiError{Status: http.StatusConflict, Code: codeConflict, Message: err.Error()}
	}},
	{is(queue.ErrBatchNotFound), func(error) *apiError {
		return &apiError{Status: http.StatusNotFound, Code: codeNotFound, Message: "batch not found"}
	}},
	{is(queue.ErrBatchExists, queue.ErrBatchSealed), func(err error) *apiError {
		return &apiError{Status: http.StatusConflict, Code: codeConflict, Message: err.Error()}
	}},
	{is(queue.ErrNotFound, history.ErrNotFound), func(error) *apiError {
		return &apiError{Status: http.StatusNotFound, Code: codeNotFound, Message: "job not found"}
	}},
	{is(queue.ErrQueueBusy), func(err error) *apiError {
		return &apiError{Status: http.StatusConflict, Code: codeConflict, Message: err.Error()}
	}},
	{is(queue.ErrConflict), func(err error) *apiError {
		msg := "job is in a conflicting state"
		if e, ok := asErr[*queue.ConflictError](err); ok {
			msg = e.Error()
		}
		return &apiError{Status: http.StatusConflict, Code: codeConflict, Message: msg}
	}},
	{is(queue.ErrInvalidCursor, history.ErrInvalidCursor), func(error) *apiError {
		return invalid("cursor", "cursor is not one this API returned")
	}},
	{is(errNoHistory), func(error) *apiError {
		return &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Message: "history store not configured"}
	}},
	{asType[*historyError], func(error) *apiError {
		return &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Message: "history store unavailable; try again later"}
	}},
	{asType[*queue.FormatError], func(error) *apiError {
		return &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Message: "this API's release cannot read the job store's storage format; it is stopping"}
	}},
	{unavailable, func(error) *apiError {
		return &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Message: "job store unavailable; try again later"}
	}},
}

var errInternal = &apiError{Status: http.StatusInternalServerError, Code: codeInternal, Message: "internal error"}

// toAPIError translates err with errorTable.
func toAPIError(err error) *apiError {
	for _, row := range errorTable {
		if row.match(err) {
			return row.to(err)
		}
	}
	return errInternal
}

// fail answers the request with err translated to the API's error shape.
// The real cause of a 5xx is attached to the request for the access log
// (with the request id), never sent.
func fail(c *gin.Context, err error) {
	e := toAPIError(err)
	c.Set(ctxErrorCode, e.Code)
	if e.Status >= 500 {
		_ = c.Error(err)
	}
	if e.Status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Bearer realm="sundial"`)
	}
	c.AbortWithStatusJSON(e.Status, errorBody{Error: errorDetail{Code: e.Code, Message: e.Message, Field: e.Field}})
}

// unavailable reports whether err means that Redis cannot be reached or
// cannot serve right now (connection refused or reset, timeouts, a closed
// pool, a server that is loading, read-only or failing over), or that the
// request was given up.
func unavailable(err error) bool {
	var ne net.Error
	switch {
	case errors.As(err, &ne),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted),
		redis.IsLoadingError(err), redis.IsReadOnlyError(err), redis.IsClusterDownError(err),
		redis.IsTryAgainError(err), redis.IsMasterDownError(err),
		errors.Is(err, queue.ErrNotReplicated), errors.Is(err, queue.ErrNotRegistered):
		return true
	}
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "BUSY ")
}

func is(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
}

func asType[T error](err error) bool {
	_, ok := asErr[T](err)
	return ok
}

func asErr[T error](err error) (T, bool) {
	var t T
	ok := errors.As(err, &t)
	return t, ok
}
