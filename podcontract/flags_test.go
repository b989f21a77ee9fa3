package podcontract

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fill sets every field of the struct v points to (embedded structs
// included) to a value no flag has by default, different per field, so a
// round trip shows each field reaching its own flag.
func fill(t *testing.T, v reflect.Value, n *int) {
	t.Helper()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		*n++
		switch f.Kind() {
		case reflect.Struct:
			fill(t, f, n)
		case reflect.String:
			// A value with a leading "-" and a "$" checks that nothing is
			// taken for a flag or expanded.
			f.SetString("-v$" + strings.Repeat("x", *n))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			if f.Type() == reflect.TypeOf(time.Duration(0)) {
				f.SetInt(int64(*n) * int64(time.Second))
			} else {
				f.SetInt(int64(*n))
			}
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"a=" + strings.Repeat("y", *n), "b,c"}))
		default:
			t.Fatalf("field %s: kind %s has no filler: extend fill", v.Type().Field(i).Name, f.Kind())
		}
	}
}

// TestRunFlagsRoundTrip: every field of RunFlags, rendered by Args (the
// controller's side) and parsed by Register's flag set (the runner's),
// comes back as it was. A field added without its flag, or rendered under
// another name, fails here.
func TestRunFlagsRoundTrip(t *testing.T) {
	var want RunFlags
	n := 0
	fill(t, reflect.ValueOf(&want).Elem(), &n)
	want.Prompt = "-p starts with a dash"

	args := want.Args()
	if args[0] != "run" {
		t.Fatalf("Args()[0] = %q, want the verb run", args[0])
	}
	var got RunFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	got.Register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	if fs.NArg() != 1 {
		t.Fatalf("%d arguments after the flags (%q), want the prompt alone", fs.NArg(), fs.Args())
	}
	got.Prompt = fs.Arg(0)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip changed the flags:\n got %+v\nwant %+v\nargs %q", got, want, args)
	}
}

// TestRunFlagsZeroRendersNothing: a zero RunFlags renders only the verb and
// "--", so the Pod's argument list carries only what the spec sets.
func TestRunFlagsZeroRendersNothing(t *testing.T) {
	if got := (RunFlags{}).Args(); !reflect.DeepEqual(got, []string{"run", "--"}) {
		t.Errorf("Args() = %q", got)
	}
}

// TestEveryRegisteredFlagIsRendered: each flag Register declares is one
// that Args can write, so the two lists cannot drift apart.
func TestEveryRegisteredFlagIsRendered(t *testing.T) {
	for name, c := range map[string]struct {
		register func(*flag.FlagSet)
		args     []string
	}{
		"run":  {func(fs *flag.FlagSet) { (&RunFlags{}).Register(fs) }, fullRun(t).Args()},
		"tail": {func(fs *flag.FlagSet) { (&TailFlags{}).Register(fs) }, fullTail(t).Args()},
	} {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		c.register(fs)
		rendered := map[string]bool{}
		for _, a := range c.args {
			if strings.HasPrefix(a, "--") {
				rendered[strings.TrimPrefix(a, "--")] = true
			}
		}
		fs.VisitAll(func(f *flag.Flag) {
			if !rendered[f.Name] {
				t.Errorf("%s: flag --%s is registered but Args never renders it", name, f.Name)
			}
		})
	}
}

func fullRun(t *testing.T) RunFlags {
	var f RunFlags
	n := 0
	fill(t, reflect.ValueOf(&f).Elem(), &n)
	return f
}

func fullTail(t *testing.T) TailFlags {
	var f TailFlags
	n := 0
	fill(t, reflect.ValueOf(&f).Elem(), &n)
	return f
}

func TestTailFlagsRoundTrip(t *testing.T) {
	want := fullTail(t)
	want.Poll = 250 * time.Millisecond // not whole seconds: rendered as a Go duration
	args := want.Args()
	var got TailFlags
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	got.Register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	got.File = fs.Arg(0)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip changed the flags:\n got %+v\nwant %+v\nargs %q", got, want, args)
	}
}

func TestParseDuration(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"0", 0, ""},
		{"300", 300 * time.Second, ""},
		{"5m", 5 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"1.5s", 1500 * time.Millisecond, ""},
		{"-1", 0, "must be a positive number"},
		{"-5m", 0, "must be a positive number"},
		{"5 m", 0, "must be a positive number"},
		{"soon", 0, "must be a positive number"},
		{"99999999999999999999", 0, "must be a positive number"},
	} {
		got, err := ParseDuration(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseDuration(%q) error = %v, want one with %q", tt.in, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestDurationStringIsReadBack(t *testing.T) {
	for _, d := range []time.Duration{time.Second, time.Hour, 1500 * time.Millisecond, 100 * time.Millisecond} {
		back, err := ParseDuration(Duration(d).String())
		if err != nil || back != d {
			t.Errorf("%v renders as %q, read back as %v, %v", d, Duration(d).String(), back, err)
		}
	}
}
