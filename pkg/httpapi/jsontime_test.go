package httpapi

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"
	"time"
)

// TestOneTimeFormat fills every answer type of the route table (and the
// stream's messages) with times of nanosecond precision in a zone other
// than UTC, and checks that each time comes out of JSON in the API's one
// format: RFC 3339, milliseconds, UTC (job.TimeLayout).
func TestOneTimeFormat(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 23, 22, 6, 41, 123456789, time.FixedZone("CET", 3600))
	format := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	values := []any{streamEvent{}, statsMessage{}}
	for _, r := range newOffline(t).routes() {
		if r.Doc.Response != nil {
			values = append(values, r.Doc.Response)
		}
	}
	for _, v := range values {
		typ := reflect.TypeOf(v)
		p := reflect.New(typ)
		fill(p.Elem(), at, 0)
		b, err := json.Marshal(p.Interface())
		if err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		checked := 0
		walkStrings(doc, func(s string) {
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				return
			}
			checked++
			if !format.MatchString(s) {
				t.Errorf("%v writes the time %q, not RFC 3339 with milliseconds in UTC:\n%s", typ, s, b)
			}
		})
		if hasTime(typ, 0) && checked == 0 {
			t.Errorf("%v has time fields but none came out as a time:\n%s", typ, b)
		}
	}
}

var timeType = reflect.TypeFor[time.Time]()

// fill sets every time in v to at, allocates pointers and gives slices and
// maps one element, so that every field shows in the JSON.
func fill(v reflect.Value, at time.Time, depth int) {
	if depth > 8 || !v.CanSet() {
		return
	}
	if v.Type() == timeType || v.Type().ConvertibleTo(timeType) && v.Kind() == reflect.Struct && v.NumField() == timeType.NumField() {
		v.Set(reflect.ValueOf(at).Convert(v.Type()))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), at, depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), at, depth+1)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // json.RawMessage and []byte
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), at, depth+1)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, at, depth+1)
		m.SetMapIndex(reflect.ValueOf("k").Convert(v.Type().Key()), e)
		v.Set(m)
	}
}

// hasTime reports whether t holds a time somewhere.
func hasTime(t reflect.Type, depth int) bool {
	if depth > 8 {
		return false
	}
	if t == timeType || t.ConvertibleTo(timeType) && t.Kind() == reflect.Struct {
		return true
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return hasTime(t.Elem(), depth+1)
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() && hasTime(t.Field(i).Type, depth+1) {
				return true
			}
		}
	}
	return false
}

// walkStrings calls f with every string value of a decoded JSON document.
func walkStrings(doc any, f func(string)) {
	switch d := doc.(type) {
	case string:
		f(d)
	case []any:
		for _, e := range d {
			walkStrings(e, f)
		}
	case map[string]any:
		for _, e := range d {
			walkStrings(e, f)
		}
	}
}
