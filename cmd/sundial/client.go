package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// client calls the Sundial HTTP API.
type client struct {
	base, key string
	timeout   time.Duration
	http      http.Client
}

// apiError is an error answer of the API.
type apiError struct {
	Status  int
	Code    string
	Message string
	Field   string
}

func (e *apiError) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	b.WriteString(" (")
	if e.Field != "" {
		fmt.Fprintf(&b, "field %s; ", e.Field)
	}
	fmt.Fprintf(&b, "%s, HTTP %d)", e.Code, e.Status)
	return b.String()
}

// do sends a request to path (under the base URL) with body (nil, raw
// JSON as []byte, or a value to marshal) and decodes a success answer into
// out when out is not nil. It returns the answer's status and body.
func (c *client) do(ctx context.Context, method, path string, body, out any) (int, []byte, error) {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return 0, nil, fmt.Errorf("bad API URL %q: %v", c.base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("cannot reach the API at %s: %v", c.base, unwrapURLError(err))
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 256<<20))
	if err != nil {
		return res.StatusCode, nil, fmt.Errorf("reading the answer of %s %s: %v", method, path, err)
	}
	if res.StatusCode >= 400 {
		return res.StatusCode, data, decodeError(res.StatusCode, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return res.StatusCode, data, fmt.Errorf("unexpected answer of %s %s: %v", method, path, err)
		}
	}
	return res.StatusCode, data, nil
}

// decodeError reads the API's error shape, or describes an answer that
// does not have it (a proxy's error page, say).
func decodeError(status int, data []byte) *apiError {
	var body struct {
		Error struct {
			Code, Message, Field string
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error.Message != "" {
		return &apiError{Status: status, Code: body.Error.Code, Message: body.Error.Message, Field: body.Error.Field}
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &apiError{Status: status, Code: "http_error", Message: msg}
}

// unwrapURLError drops the "Get \"http://…\":" prefix of a transport
// error; the message already names the URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
