package contract

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/supervaize/svz/core/internal/wirejson"
)

// The wire encoder writes a result in one pass into one buffer. encoding/json, given the same
// value, calls each nested MarshalJSON, then validates and compacts the bytes it returns, level
// after level; here a contract type writes itself onto the shared encoder (its wire method: the
// type's defaults, then its json-tagged fields in order and its Extra members sorted by name),
// and nothing is read twice. The output is byte for byte what json.Marshal writes for the same
// value (HTML-safe escaping included), which the tests check against encoding/json.
//
// A field added to a contract struct needs nothing more: the encoder follows the json tags
// (name, omitzero, omitempty, "-") as encoding/json does. One tag of its own, wire:"nonnil",
// writes a nil slice or map as [] or {} instead of null.

// wirer is a contract type that writes its own wire form: it applies its defaults and calls
// encoder.object. Every MarshalJSON of such a type is marshal(&value).
type wirer interface {
	wire(e *encoder) error
}

// encoder is an append buffer plus the state one encoding needs.
type encoder struct {
	buf   []byte
	keys  []string // scratch for sorting map keys; nested maps use the space after their parent's
	depth int
}

// AppendJSON appends the JSON encoding of v to dst: what json.Marshal(v) returns, written in one
// pass when v is (or holds) contract types. On error dst is returned unchanged.
func AppendJSON(dst []byte, v any) ([]byte, error) {
	e := encoder{buf: dst}
	if err := e.any(v); err != nil {
		return dst, err
	}
	return e.buf, nil
}

// marshal is the MarshalJSON of every wirer.
func marshal(v wirer) ([]byte, error) {
	var e encoder
	if err := v.wire(&e); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// object writes the struct *ptr (its json-tagged fields in declaration order) followed by the
// members of extra that no field declares, sorted by name. A member of extra named like a field
// that is left out (zero, with omitzero) is written in that field's place. Each extra value must
// be valid JSON; it is written compact.
func (e *encoder) object(ptr any, extra Extra) error {
	v := reflect.ValueOf(ptr).Elem()
	p := planOf(v.Type())
	e.buf = append(e.buf, '{')
	n := 0
	for i := range p.fields {
		f := &p.fields[i]
		fv := v.Field(f.index)
		if f.omit != nil && f.omit(fv) {
			// Left out: Extra may hold what the Go zero value cannot say (an explicit "").
			if raw, ok := extra[f.name]; ok {
				if n > 0 {
					e.buf = append(e.buf, ',')
				}
				n++
				e.buf = append(e.buf, f.key...)
				var err error
				if e.buf, err = wirejson.AppendCompact(e.buf, raw, true); err != nil {
					return fmt.Errorf("extra member %q is not valid JSON", f.name)
				}
			}
			continue
		}
		if n > 0 {
			e.buf = append(e.buf, ',')
		}
		n++
		e.buf = append(e.buf, f.key...)
		if err := f.enc(e, fv); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if len(extra) > 0 {
		start := len(e.keys)
		for k := range extra {
			if _, declared := p.names[k]; !declared {
				e.keys = append(e.keys, k)
			}
		}
		keys := e.keys[start:]
		slices.Sort(keys)
		for _, k := range keys {
			if n > 0 {
				e.buf = append(e.buf, ',')
			}
			n++
			e.buf = wirejson.AppendString(e.buf, k)
			e.buf = append(e.buf, ':')
			var err error
			if e.buf, err = wirejson.AppendCompact(e.buf, extra[k], true); err != nil {
				return fmt.Errorf("extra member %q is not valid JSON", k)
			}
		}
		e.keys = e.keys[:start]
	}
	e.buf = append(e.buf, '}')
	return nil
}

// encodeFunc writes v, a value of the type it was made for.
type encodeFunc func(e *encoder, v reflect.Value) error

// structPlan is how a contract struct type is written.
type structPlan struct {
	fields []fieldPlan
	names  map[string]struct{} // every declared member name, to keep Extra from repeating one
}

// field returns the plan of the member name, nil when no field declares it.
func (p *structPlan) field(name string) *fieldPlan {
	for i := range p.fields {
		if p.fields[i].name == name {
			return &p.fields[i]
		}
	}
	return nil
}

type fieldPlan struct {
	index int
	name  string
	key   []byte                   // the encoded name and colon
	omit  func(reflect.Value) bool // nil: always written
	enc   encodeFunc
}

// plans returns the plan of every contract struct type the encoder meets on the hot path, built
// once, from the types alone, on first use (not at start-up: a cold start that serves discovery
// first does not pay for it), and never modified afterwards. A type it does not hold gets a plan
// built on the spot; TestPlansCoverWireTypes keeps the list complete.
var plans func() map[reflect.Type]*structPlan

func init() { // not a var initializer: plans are built by code that reads plans
	plans = sync.OnceValue(func() map[reflect.Type]*structPlan {
		return buildPlans(
			reflect.TypeFor[ActionResult](), reflect.TypeFor[SurfaceResult](),
			reflect.TypeFor[ActionRequest](), reflect.TypeFor[SurfaceRequest](),
			reflect.TypeFor[ResourceFieldDefinition](), reflect.TypeFor[EffectEvent](),
		)
	})
}

func planOf(t reflect.Type) *structPlan {
	if p := plans()[t]; p != nil {
		return p
	}
	return newPlan(t)
}

// buildPlans plans the given struct types and every contract struct type their fields reach.
func buildPlans(roots ...reflect.Type) map[reflect.Type]*structPlan {
	m := map[reflect.Type]*structPlan{}
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			visit(t.Elem())
			return
		case reflect.Struct:
		default:
			return
		}
		if _, done := m[t]; done || !isContractType(t) {
			return
		}
		m[t] = newPlan(t)
		for i := range t.NumField() {
			visit(t.Field(i).Type)
		}
	}
	for _, t := range roots {
		visit(t)
	}
	return m
}

var contractPkg = reflect.TypeFor[Extra]().PkgPath()

func isContractType(t reflect.Type) bool { return t.PkgPath() == contractPkg }

// newPlan reads the json tags of the struct type t the way encoding/json does. Embedded structs
// and the ",string" option are not used by contract types and not supported: a contract type that
// used them would fail every test at start-up, not encode wrongly.
func newPlan(t reflect.Type) *structPlan {
	p := &structPlan{names: map[string]struct{}{}}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" || !sf.IsExported() && !sf.Anonymous {
			continue
		}
		if sf.Anonymous {
			panic(fmt.Sprintf("contract: %s embeds %s: the wire encoder does not support embedded fields; declare the members", t, sf.Type))
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		f := fieldPlan{index: i, name: name, enc: encoderOf(sf.Type)}
		f.key = append(wirejson.AppendString(nil, name), ':')
		if sf.Tag.Get("wire") == "nonnil" {
			f.enc = nonNilEncoder(t, sf)
		}
		for opt := range strings.SplitSeq(opts, ",") {
			switch opt {
			case "":
			case "omitzero":
				f.omit = isZeroFunc(sf.Type)
			case "omitempty":
				f.omit = isEmpty
			default:
				panic(fmt.Sprintf("contract: %s.%s: the wire encoder does not support the json option %q", t, sf.Name, opt))
			}
		}
		p.fields = append(p.fields, f)
		p.names[name] = struct{}{}
	}
	return p
}

// nonNilEncoder writes a field tagged wire:"nonnil": a nil slice as [] and a nil map as {},
// where encoding/json would write null (the reference always writes these lists and objects).
func nonNilEncoder(t reflect.Type, sf reflect.StructField) encodeFunc {
	var empty string
	switch sf.Type.Kind() {
	case reflect.Slice:
		empty = "[]"
	case reflect.Map:
		empty = "{}"
	default:
		panic(fmt.Sprintf("contract: %s.%s: wire:\"nonnil\" applies to slices and maps, not %s", t, sf.Name, sf.Type))
	}
	enc := encoderOf(sf.Type)
	return func(e *encoder, v reflect.Value) error {
		if v.IsNil() {
			e.buf = append(e.buf, empty...)
			return nil
		}
		return enc(e, v)
	}
}

var (
	wirerType         = reflect.TypeFor[wirer]()
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	numberType        = reflect.TypeFor[json.Number]()
	isZeroerType      = reflect.TypeFor[interface{ IsZero() bool }]()
)

// isZeroFunc is encoding/json's omitzero test: the type's IsZero method when it has one, else
// the zero value.
func isZeroFunc(t reflect.Type) func(reflect.Value) bool {
	type isZeroer interface{ IsZero() bool }
	switch {
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.IsNil() || v.Interface().(isZeroer).IsZero() }
	case t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.Interface().(isZeroer).IsZero() }
	case reflect.PointerTo(t).Implements(isZeroerType):
		return func(v reflect.Value) bool { return addressable(v).Addr().Interface().(isZeroer).IsZero() }
	}
	return reflect.Value.IsZero
}

// isEmpty is encoding/json's omitempty test.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// encoderOf returns how values of type t are written.
func encoderOf(t reflect.Type) encodeFunc {
	// Only named types and pointers can have methods: the others skip the method checks.
	named := t.Name() != "" && t.PkgPath() != "" || t.Kind() == reflect.Pointer
	switch {
	case !named:
	case t == rawMessageType:
		return encodeRaw
	case t == numberType:
		return encodeNumber
	case reflect.PointerTo(t).Implements(wirerType):
		return encodeWirer
	case t.Kind() == reflect.Pointer && t.Implements(wirerType): // *T: null, or T writes itself
		return func(e *encoder, v reflect.Value) error {
			if v.IsNil() {
				e.buf = append(e.buf, "null"...)
				return nil
			}
			return encodeWirer(e, v.Elem())
		}
	case t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) ||
		t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType):
		return encodeFallback
	}
	switch t.Kind() {
	case reflect.String:
		return func(e *encoder, v reflect.Value) error {
			e.buf = wirejson.AppendString(e.buf, v.String())
			return nil
		}
	case reflect.Bool:
		return func(e *encoder, v reflect.Value) error {
			e.buf = strconv.AppendBool(e.buf, v.Bool())
			return nil
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return func(e *encoder, v reflect.Value) error {
			e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
			return nil
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return func(e *encoder, v reflect.Value) error {
			e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
			return nil
		}
	case reflect.Float32, reflect.Float64:
		bits := t.Bits()
		return func(e *encoder, v reflect.Value) error {
			var ok bool
			if e.buf, ok = wirejson.AppendFloat(e.buf, v.Float(), bits); !ok {
				return fmt.Errorf("unsupported value %v", v.Float())
			}
			return nil
		}
	case reflect.Interface:
		return func(e *encoder, v reflect.Value) error { return e.any(v.Interface()) }
	case reflect.Pointer:
		// Element encoders are resolved now, once: recursion stops at contract structs, whose
		// plans are looked up when written, so a type that refers to itself is fine.
		elem := encoderOf(t.Elem())
		return func(e *encoder, v reflect.Value) error {
			if v.IsNil() {
				e.buf = append(e.buf, "null"...)
				return nil
			}
			if err := e.enter(); err != nil {
				return err
			}
			defer e.leave()
			return elem(e, v.Elem())
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return encodeFallback // base64, as encoding/json writes []byte
		}
		elem := encoderOf(t.Elem())
		return func(e *encoder, v reflect.Value) error {
			if v.IsNil() {
				e.buf = append(e.buf, "null"...)
				return nil
			}
			if err := e.enter(); err != nil {
				return err
			}
			defer e.leave()
			e.buf = append(e.buf, '[')
			for i := range v.Len() {
				if i > 0 {
					e.buf = append(e.buf, ',')
				}
				if err := elem(e, v.Index(i)); err != nil {
					return err
				}
			}
			e.buf = append(e.buf, ']')
			return nil
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String || t.Key().Implements(textMarshalerType) {
			return encodeFallback
		}
		elem := encoderOf(t.Elem())
		return func(e *encoder, v reflect.Value) error {
			if v.IsNil() {
				e.buf = append(e.buf, "null"...)
				return nil
			}
			if err := e.enter(); err != nil {
				return err
			}
			defer e.leave()
			return e.mapOf(v, elem)
		}
	case reflect.Struct:
		if isContractType(t) {
			return func(e *encoder, v reflect.Value) error {
				if err := e.enter(); err != nil {
					return err
				}
				defer e.leave()
				return e.object(addressable(v).Addr().Interface(), nil)
			}
		}
	}
	return encodeFallback
}

// enter goes one level deeper, refusing values nested past wirejson.MaxDepth: deeper than
// anything the controller reads, and the sign of a cycle, which would otherwise never end.
func (e *encoder) enter() error {
	e.depth++
	if e.depth > wirejson.MaxDepth {
		e.depth--
		return errors.New("value nested too deep, or holding a cycle")
	}
	return nil
}

func (e *encoder) leave() { e.depth-- }

// any writes a value of any type; the usual dynamic types of free-form members first, without
// reflection.
func (e *encoder) any(x any) error {
	switch x := x.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case string:
		e.buf = wirejson.AppendString(e.buf, x)
	case bool:
		e.buf = strconv.AppendBool(e.buf, x)
	case float64:
		var ok bool
		if e.buf, ok = wirejson.AppendFloat(e.buf, x, 64); !ok {
			return fmt.Errorf("unsupported value %v", x)
		}
	case int:
		e.buf = strconv.AppendInt(e.buf, int64(x), 10)
	case int64:
		e.buf = strconv.AppendInt(e.buf, x, 10)
	case json.Number:
		return e.number(x)
	case json.RawMessage:
		return e.raw(x)
	case map[string]any:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if err := e.enter(); err != nil {
			return err
		}
		defer e.leave()
		return e.mapAny(x)
	case []any:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if err := e.enter(); err != nil {
			return err
		}
		defer e.leave()
		e.buf = append(e.buf, '[')
		for i, it := range x {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.any(it); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, ']')
	case wirer:
		if v := reflect.ValueOf(x); v.Kind() == reflect.Pointer && v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		if err := e.enter(); err != nil {
			return err
		}
		defer e.leave()
		return x.wire(e)
	default:
		v := reflect.ValueOf(x)
		return encoderOf(v.Type())(e, v)
	}
	return nil
}

func (e *encoder) mapAny(m map[string]any) error {
	start := len(e.keys)
	for k := range m {
		e.keys = append(e.keys, k)
	}
	keys := e.keys[start:]
	slices.Sort(keys)
	e.buf = append(e.buf, '{')
	for i, k := range keys {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = wirejson.AppendString(e.buf, k)
		e.buf = append(e.buf, ':')
		if err := e.any(m[k]); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	e.keys = e.keys[:start]
	return nil
}

func (e *encoder) mapOf(v reflect.Value, elem encodeFunc) error {
	start := len(e.keys)
	for _, k := range v.MapKeys() {
		e.keys = append(e.keys, k.String())
	}
	keys := e.keys[start:]
	slices.Sort(keys)
	e.buf = append(e.buf, '{')
	for i, k := range keys {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = wirejson.AppendString(e.buf, k)
		e.buf = append(e.buf, ':')
		if err := elem(e, v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key()))); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	e.keys = e.keys[:start]
	return nil
}

// raw writes a json.RawMessage as encoding/json does: null when nil, else validated, compact and
// HTML-escaped.
func (e *encoder) raw(m json.RawMessage) error {
	if m == nil {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	var err error
	if e.buf, err = wirejson.AppendCompact(e.buf, m, true); err != nil {
		return errors.New("a raw JSON member is not valid JSON")
	}
	return nil
}

// number writes a json.Number as encoding/json does: "" is 0, anything else must be a number.
func (e *encoder) number(n json.Number) error {
	s := string(n)
	if s == "" {
		s = "0"
	}
	if !wirejson.ValidNumber(s) {
		return fmt.Errorf("invalid number literal %q", s)
	}
	e.buf = append(e.buf, s...)
	return nil
}

func encodeRaw(e *encoder, v reflect.Value) error { return e.raw(v.Bytes()) }

func encodeNumber(e *encoder, v reflect.Value) error { return e.number(json.Number(v.String())) }

// encodeWirer lets a contract type write itself.
func encodeWirer(e *encoder, v reflect.Value) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	return addressable(v).Addr().Interface().(wirer).wire(e)
}

// encodeFallback hands everything else to encoding/json, which writes it exactly as it would
// inside json.Marshal of the whole result: a handler's own struct in a free-form member, a custom
// marshaler (the registration types, encoded at start-up rather than per call, are among them),
// []byte, maps keyed by numbers.
func encodeFallback(e *encoder, v reflect.Value) error {
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return err
	}
	e.buf = append(e.buf, b...)
	return nil
}

// addressable returns v, or an addressable copy of it (a value held in an interface or a map).
func addressable(v reflect.Value) reflect.Value {
	if v.CanAddr() {
		return v
	}
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	return c
}
