package manifest

import "reflect"

// Clone returns a deep copy of m: nothing reachable from the copy is shared
// with m except strings, which cannot change. A job's transactions start
// from the manifest the previous one left (jobtx.Kept); cloning it costs a
// fraction of decoding the file again.
//
// It copies by reflection, so a field added to Manifest (or to anything it
// holds) is copied without a change here.
func (m *Manifest) Clone() *Manifest {
	if m == nil {
		return nil
	}
	c := new(Manifest)
	deepCopy(reflect.ValueOf(c).Elem(), reflect.ValueOf(m).Elem())
	return c
}

// deepCopy sets dst, a settable value of src's type, to a deep copy of src.
func deepCopy(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		deepCopy(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Struct:
		for i := range src.NumField() {
			deepCopy(dst.Field(i), src.Field(i))
		}
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		if flat(src.Type().Elem()) {
			reflect.Copy(s, src)
		} else {
			for i := range src.Len() {
				deepCopy(s.Index(i), src.Index(i))
			}
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		mp := reflect.MakeMapWithSize(src.Type(), src.Len())
		v := reflect.New(src.Type().Elem()).Elem()
		for it := src.MapRange(); it.Next(); {
			v.SetZero()
			deepCopy(v, it.Value())
			mp.SetMapIndex(it.Key(), v) // keys are strings: immutable
		}
		dst.Set(mp)
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		v := reflect.New(src.Elem().Type()).Elem()
		deepCopy(v, src.Elem())
		dst.Set(v)
	default:
		// Booleans, numbers and strings are values (strings immutable);
		// Manifest holds no channels or functions.
		dst.Set(src)
	}
}

// flat says whether values of t can be copied as they are: they reach
// nothing mutable.
func flat(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return false
	case reflect.Array:
		return flat(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !flat(t.Field(i).Type) {
				return false
			}
		}
	}
	return true
}
