package manifest

import (
	"fmt"
	"reflect"
	"testing"
)

// fill sets every field reachable from v to a non-zero value, so that a
// field added later is covered by the test below without a change here.
func fill(t *testing.T, v reflect.Value, depth int) {
	t.Helper()
	if depth > 12 {
		t.Fatalf("type %s nests too deep to fill", v.Type())
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), depth+1)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(t, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := range 2 {
			k := reflect.New(v.Type().Key()).Elem()
			k.SetString(fmt.Sprintf("k%d", i))
			e := reflect.New(v.Type().Elem()).Elem()
			fill(t, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Interface:
		// What JSON decodes into an any: nested maps and slices.
		v.Set(reflect.ValueOf(map[string]any{"a": []any{"x", map[string]any{"b": 1.0}}}))
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Uint8:
		v.SetUint('7')
	case reflect.Float64:
		v.SetFloat(1.5)
	default:
		t.Fatalf("fill: kind %s (%s) not handled", v.Kind(), v.Type())
	}
}

// refs collects the address of everything mutable reachable from v:
// pointers, slices' arrays, maps.
func refs(v reflect.Value, out map[uintptr]string, path string) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			out[v.Pointer()] = path
			refs(v.Elem(), out, path+".*")
		}
	case reflect.Struct:
		for i := range v.NumField() {
			refs(v.Field(i), out, path+"."+v.Type().Field(i).Name)
		}
	case reflect.Slice:
		if v.Len() > 0 {
			out[v.Pointer()] = path
		}
		for i := range v.Len() {
			refs(v.Index(i), out, fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if !v.IsNil() {
			out[v.Pointer()] = path
		}
		for it := v.MapRange(); it.Next(); {
			refs(it.Value(), out, fmt.Sprintf("%s[%v]", path, it.Key()))
		}
	case reflect.Interface:
		if !v.IsNil() {
			refs(v.Elem(), out, path)
		}
	}
}

// A clone equals its original and shares nothing mutable with it, for
// every field Manifest has.
func TestCloneIsDeepAndEqual(t *testing.T) {
	var m Manifest
	fill(t, reflect.ValueOf(&m).Elem(), 0)
	c := m.Clone()
	if !reflect.DeepEqual(c, &m) {
		t.Fatalf("clone differs:\n%+v\n%+v", c, &m)
	}
	orig, cl := map[uintptr]string{}, map[uintptr]string{}
	refs(reflect.ValueOf(&m), orig, "m")
	refs(reflect.ValueOf(c), cl, "m")
	if len(orig) < 20 {
		t.Fatalf("only %d references found in a filled manifest", len(orig))
	}
	for p, path := range cl {
		if _, shared := orig[p]; shared {
			t.Errorf("%s is shared with the original", path)
		}
	}
	// Nil stays nil; an empty (non-nil) slice stays empty and non-nil,
	// which JSON tells apart ("history": [] against null).
	e := (&Manifest{History: []AuditEntry{}}).Clone()
	if e.History == nil || e.Agents != nil || e.CurrentPhase != nil {
		t.Errorf("clone of a sparse manifest: %+v", e)
	}
	if (*Manifest)(nil).Clone() != nil {
		t.Error("clone of nil is not nil")
	}
}

// BenchmarkClone is what a transaction pays instead of DecodeTrusted when
// it starts from the manifest the previous one left.
func BenchmarkClone(b *testing.B) {
	m, err := DecodeTrusted("job.json", benchManifest)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		m.Clone()
	}
}
