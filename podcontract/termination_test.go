package podcontract

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/aggregator"
)

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }
func str(v string) *string   { return &v }
func intp(v int) *int        { return &v }
func counts(in, out int64) events.TokenCounts {
	return events.TokenCounts{InputTokens: i64(in), OutputTokens: i64(out), CacheReadTokens: i64(0), CacheWriteTokens: i64(0), CostUSD: f64(0.0001)}
}

// end returns a finished end event with one model's usage.
func end(result *string) *events.End {
	u := counts(18234, 912)
	u.CostUSD = f64(0.0436916)
	return &events.End{
		Status: events.StatusFinished, ExitCode: intp(0), DurationMs: 31250,
		Usage:  events.Totals{TokenCounts: u, ByModel: map[string]events.TokenCounts{"claude-sonnet-5-5": u}},
		Result: result, SessionID: str("0b9ad7a1-6c1e-4d65-9d8e-1f1b0a4d2c77"),
	}
}

var someCounters = aggregator.Counters{Tools: 12, ToolErrors: 2, Denials: 1, Subagents: 3, DeniedConnections: 4}

// roundTrip encodes s, checks the bound and decodes it again.
func roundTrip(t *testing.T, s Summary) Summary {
	t.Helper()
	b := s.Encode()
	if len(b) > MaxBytes {
		t.Fatalf("Encode gave %d bytes, more than %d", len(b), MaxBytes)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode(Encode()) failed: %v\n%s", err, b)
	}
	return got
}

func TestFromEndKeepsEverything(t *testing.T) {
	e := end(str("测试全部通过。"))
	s := FromEnd(e, someCounters)
	if s.Status != "finished" || *s.ExitCode != 0 || s.DurationMs != 31250 || *s.Result != "测试全部通过。" ||
		s.ResultBytes != len("测试全部通过。") || *s.SessionID != *e.SessionID || s.Counters != someCounters || s.Cut() {
		t.Fatalf("FromEnd lost something: %+v", s)
	}
	// The summary owns its values: changing the end event changes nothing.
	*e.Result = "x"
	*e.Usage.InputTokens = 1
	if *s.Result == "x" || *s.Usage.InputTokens == 1 {
		t.Fatal("FromEnd shares pointers with the end event")
	}
	if got := roundTrip(t, s); !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip changed the summary:\n got %+v\nwant %+v", got, s)
	}
}

func TestFromNilEnd(t *testing.T) {
	s := FromEnd(nil, aggregator.Counters{})
	if s.Status != events.StatusFailed || s.Detail == "" || s.Usage.ByModel == nil {
		t.Fatalf("FromEnd(nil) = %+v", s)
	}
	roundTrip(t, s)
}

func TestNullsStayNull(t *testing.T) {
	e := &events.End{Status: events.StatusInterrupted, Usage: events.Totals{ByModel: map[string]events.TokenCounts{}}}
	b := FromEnd(e, aggregator.Counters{}).Encode()
	for _, want := range []string{`"exit_code":null`, `"result":null`, `"session_id":null`, `"input_tokens":null`, `"by_model":{}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("encoding lacks %s: %s", want, b)
		}
	}
	if strings.Contains(string(b), "_cut") {
		t.Errorf("uncut summary carries a cut mark: %s", b)
	}
}

func TestCuts(t *testing.T) {
	manyModels := map[string]events.TokenCounts{}
	for i := range 500 {
		manyModels[fmt.Sprintf("model-%03d", i)] = counts(int64(1000+i), int64(i))
	}
	tests := []struct {
		name   string
		edit   func(e *events.End)
		result string // expected kind of result: whole, cut, null
		detail string // whole, cut
		models string // whole, cut
		check  func(t *testing.T, s Summary)
	}{
		{name: "small", edit: func(e *events.End) {}, result: "whole", detail: "whole", models: "whole"},
		{name: "long ASCII result", edit: func(e *events.End) { e.Result = str(strings.Repeat("a", 100_000)) },
			result: "cut", detail: "whole", models: "whole",
			check: func(t *testing.T, s Summary) {
				if len(*s.Result) < 3000 {
					t.Errorf("only %d bytes of the result kept; the rest of the summary is small", len(*s.Result))
				}
			}},
		{name: "3-byte characters", edit: func(e *events.End) { e.Result = str(strings.Repeat("测", 5000)) },
			result: "cut", detail: "whole", models: "whole"},
		{name: "3-byte characters shifted by one byte", edit: func(e *events.End) { e.Result = str("x" + strings.Repeat("测", 5000)) },
			result: "cut", detail: "whole", models: "whole"},
		{name: "3-byte characters shifted by two bytes", edit: func(e *events.End) { e.Result = str("xy" + strings.Repeat("测", 5000)) },
			result: "cut", detail: "whole", models: "whole"},
		{name: "4-byte emoji", edit: func(e *events.End) { e.Result = str("z" + strings.Repeat("🦀", 3000)) },
			result: "cut", detail: "whole", models: "whole"},
		{name: "escapes grow six-fold", edit: func(e *events.End) { e.Result = str(strings.Repeat("\x01\"\\\n", 4000)) },
			result: "cut", detail: "whole", models: "whole"},
		{name: "U+2028 is escaped", edit: func(e *events.End) { e.Result = str(strings.Repeat("\u2028", 4000)) },
			result: "cut", detail: "whole", models: "whole"},
		{name: "null result, huge detail", edit: func(e *events.End) {
			e.Status, e.Result, e.Detail = events.StatusFailed, nil, strings.Repeat("stderr line\n", 100_000)
		}, result: "null", detail: "cut", models: "whole",
			check: func(t *testing.T, s Summary) {
				if len(s.Detail) > maxDetailBytes {
					t.Errorf("detail kept %d bytes, more than %d", len(s.Detail), maxDetailBytes)
				}
			}},
		{name: "huge detail and huge result", edit: func(e *events.End) {
			e.Status, e.Detail, e.Result = events.StatusFailed, strings.Repeat("é", 1_000_000), str(strings.Repeat("r", 1_000_000))
		}, result: "cut", detail: "cut", models: "whole",
			check: func(t *testing.T, s Summary) {
				if len(*s.Result) < minResultBytes {
					t.Errorf("the result got only %d bytes", len(*s.Result))
				}
			}},
		{name: "many models, no result", edit: func(e *events.End) { e.Result = nil; e.Usage.ByModel = manyModels },
			result: "null", detail: "whole", models: "cut"},
		{name: "many models and a long result", edit: func(e *events.End) {
			e.Usage.ByModel = manyModels
			e.Result = str(strings.Repeat("answer ", 2000))
		}, result: "cut", detail: "whole", models: "cut",
			check: func(t *testing.T, s Summary) {
				if len(*s.Result) < minResultBytes-10 {
					t.Errorf("the result got only %d bytes next to the models", len(*s.Result))
				}
				if len(s.Usage.ByModel) == 0 {
					t.Error("no model kept although there was room")
				}
				// The kept models are the largest ones.
				for m := range s.Usage.ByModel {
					if m < "model-4" {
						t.Errorf("kept small model %s", m)
					}
				}
			}},
		{name: "huge detail, many models, huge result", edit: func(e *events.End) {
			e.Usage.ByModel = manyModels
			e.Detail = strings.Repeat("d", 50_000)
			e.Result = str(strings.Repeat("测", 50_000))
		}, result: "cut", detail: "cut", models: "cut"},
		{name: "huge session id", edit: func(e *events.End) { e.SessionID = str(strings.Repeat("s", 10_000)) },
			result: "whole", detail: "whole", models: "whole",
			check: func(t *testing.T, s Summary) {
				if s.SessionID != nil || !s.SessionIDCut {
					t.Errorf("a session id that cannot fit must be dropped and marked: %v %v", s.SessionID, s.SessionIDCut)
				}
			}},
		{name: "invalid UTF-8 in the result", edit: func(e *events.End) { e.Result = str(strings.Repeat("\xff\xfe", 3000)) },
			result: "cut", detail: "whole", models: "whole"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := end(str("done"))
			tt.edit(e)
			whole := FromEnd(e, someCounters)
			s := roundTrip(t, whole)

			if s.Status != e.Status || s.DurationMs != e.DurationMs || s.Counters != someCounters {
				t.Errorf("essential fields changed: %+v", s)
			}
			if !reflect.DeepEqual(s.Usage.TokenCounts, e.Usage.TokenCounts) {
				t.Errorf("usage totals changed: %+v", s.Usage.TokenCounts)
			}
			switch tt.result {
			case "null":
				if s.Result != nil || s.ResultCut {
					t.Errorf("result = %v (cut %v), want null", s.Result, s.ResultCut)
				}
			case "whole":
				if s.Result == nil || *s.Result != *e.Result || s.ResultCut {
					t.Errorf("result cut although it fits (cut mark %v)", s.ResultCut)
				}
			case "cut":
				if !s.ResultCut || s.Result == nil || len(*s.Result) >= len(*e.Result) {
					t.Fatalf("result not cut and marked: cut %v", s.ResultCut)
				}
				if !utf8.ValidString(*e.Result) {
					break // invalid bytes come back as U+FFFD: no prefix check
				}
				if !strings.HasPrefix(*e.Result, *s.Result) || !utf8.ValidString(*s.Result) {
					t.Errorf("cut result is not a valid UTF-8 prefix of the result: %q", tail(*s.Result))
				}
			}
			if s.ResultBytes != whole.ResultBytes {
				t.Errorf("result_bytes = %d, want %d", s.ResultBytes, whole.ResultBytes)
			}
			switch tt.detail {
			case "whole":
				if s.Detail != e.Detail || s.DetailCut {
					t.Errorf("detail changed (cut %v)", s.DetailCut)
				}
			case "cut":
				if !s.DetailCut || !strings.HasPrefix(e.Detail, s.Detail) || !utf8.ValidString(s.Detail) {
					t.Errorf("detail not cut to a marked valid prefix (cut %v): %q", s.DetailCut, tail(s.Detail))
				}
			}
			switch tt.models {
			case "whole":
				if len(s.Usage.ByModel) != len(e.Usage.ByModel) || s.ByModelCut {
					t.Errorf("by_model has %d of %d models (cut %v)", len(s.Usage.ByModel), len(e.Usage.ByModel), s.ByModelCut)
				}
			case "cut":
				if !s.ByModelCut || len(s.Usage.ByModel) >= len(e.Usage.ByModel) {
					t.Errorf("by_model not cut and marked: %d models, cut %v", len(s.Usage.ByModel), s.ByModelCut)
				}
				for m, c := range s.Usage.ByModel {
					if !reflect.DeepEqual(c, e.Usage.ByModel[m]) {
						t.Errorf("model %s changed", m)
					}
				}
			}
			if s.Cut() != (tt.result == "cut" || tt.detail == "cut" || tt.models == "cut" || s.SessionIDCut) {
				t.Errorf("Cut() = %v", s.Cut())
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

// TestExactBound: a summary of exactly MaxBytes is kept whole; one more
// byte of result cuts it.
func TestExactBound(t *testing.T) {
	base := FromEnd(end(str("")), someCounters)
	room := MaxBytes - len(base.Encode())
	// result_bytes grows from 1 digit to 4 as the result grows: find the
	// length whose whole encoding is exactly MaxBytes.
	n := room
	for ; n > 0; n-- {
		s := FromEnd(end(str(strings.Repeat("a", n))), someCounters)
		if len(s.Encode()) == MaxBytes && !roundTrip(t, s).ResultCut {
			break
		}
	}
	if n == 0 {
		t.Fatal("no result length gives exactly MaxBytes")
	}
	s := FromEnd(end(str(strings.Repeat("a", n))), someCounters)
	if got := roundTrip(t, s); got.ResultCut || len(*got.Result) != n {
		t.Fatalf("a result that makes exactly %d bytes was cut", MaxBytes)
	}
	s = FromEnd(end(str(strings.Repeat("a", n+1))), someCounters)
	got := roundTrip(t, s)
	if !got.ResultCut || got.ResultBytes != n+1 {
		t.Fatalf("one byte over the bound: cut %v, result_bytes %d", got.ResultCut, got.ResultBytes)
	}
}

func TestNonFiniteCost(t *testing.T) {
	e := end(str("ok"))
	e.Usage.CostUSD = f64(math.NaN())
	m := e.Usage.ByModel["claude-sonnet-5-5"]
	m.CostUSD = f64(math.Inf(1))
	e.Usage.ByModel["claude-sonnet-5-5"] = m
	s := roundTrip(t, FromEnd(e, someCounters))
	if s.Usage.CostUSD != nil || s.Usage.ByModel["claude-sonnet-5-5"].CostUSD != nil {
		t.Fatal("a cost JSON cannot carry must become null")
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty summary"},
		{"  \n", "empty summary"},
		{"Error: OOMKilled", "not an agentrun end summary"},
		{`{"v":2,"status":"finished"}`, "unsupported end summary version 2"},
		{`{"status":"finished"}`, "unsupported end summary version 0"},
		{`{"v":1}`, "without a status"},
	}
	for _, tt := range tests {
		_, err := Decode([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Decode(%q) error = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestDecodeFillsByModel(t *testing.T) {
	s, err := Decode([]byte(`{"v":1,"status":"failed","usage":{"by_model":null}}`))
	if err != nil || s.Usage.ByModel == nil {
		t.Fatalf("Decode = %+v, %v", s, err)
	}
}

func TestBoundary(t *testing.T) {
	s := "a测🦀\xffb"
	// byte offsets: a=0, 测=1..3, 🦀=4..7, \xff=8, b=9
	want := map[int]int{0: 0, 1: 1, 2: 1, 3: 1, 4: 4, 5: 4, 6: 4, 7: 4, 8: 8, 9: 9, 10: 10, 11: 10}
	for i, w := range want {
		if got := boundary(s, i); got != w {
			t.Errorf("boundary(%d) = %d, want %d", i, got, w)
		}
	}
}

// FuzzEncode: whatever the end event holds, the encoding fits, decodes, and
// cut fields are marked.
func FuzzEncode(f *testing.F) {
	f.Add("done", "", "m", 1, 1000)
	f.Add(strings.Repeat("测", 2000), strings.Repeat("\x00", 900), "claude", 40, 1)
	f.Add("\xff\xfe\u2028", "<&>", "", 0, 0)
	f.Fuzz(func(t *testing.T, result, detail, model string, models, repeat int) {
		// Bound the sizes instead of rejecting inputs: every input runs.
		models, repeat = bounded(models, 300), bounded(repeat, 3000)
		e := end(str(strings.Repeat(result, repeat)))
		e.Detail = strings.Repeat(detail, repeat)
		for i := range models {
			e.Usage.ByModel[fmt.Sprintf("%s-%d", model, i)] = counts(int64(i), 1)
		}
		whole := FromEnd(e, someCounters)
		b := whole.Encode()
		if len(b) > MaxBytes {
			t.Fatalf("%d bytes", len(b))
		}
		s, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(b) {
			t.Fatal("invalid JSON")
		}
		if !s.ResultCut && utf8.ValidString(*e.Result) && *s.Result != *e.Result {
			t.Fatal("result changed without a cut mark")
		}
		if !s.DetailCut && utf8.ValidString(e.Detail) && s.Detail != e.Detail {
			t.Fatal("detail changed without a cut mark")
		}
		if !s.ByModelCut && len(s.Usage.ByModel) != len(e.Usage.ByModel) {
			t.Fatal("models dropped without a cut mark")
		}
	})
}

func tail(s string) string {
	if len(s) > 20 {
		return s[len(s)-20:]
	}
	return s
}

// bounded maps any int into [0, n).
func bounded(v, n int) int {
	v %= n
	if v < 0 {
		v += n
	}
	return v
}

func TestCutUTF8(t *testing.T) {
	tests := []struct {
		in      string
		n       int
		want    string
		wantCut bool
	}{
		{"abc", 5, "abc", false},
		{"abc", 3, "abc", false},
		{"abc", 2, "ab", true},
		{"a测b", 2, "a", true},
		{"a测b", 3, "a", true},
		{"a测b", 4, "a测", true},
		{"🦀🦀", 7, "🦀", true},
		{"abc", 0, "", true},
		{"abc", -1, "", true},
	}
	for _, tt := range tests {
		got, cut := CutUTF8(tt.in, tt.n)
		if got != tt.want || cut != tt.wantCut {
			t.Errorf("CutUTF8(%q, %d) = %q, %v; want %q, %v", tt.in, tt.n, got, cut, tt.want, tt.wantCut)
		}
	}
}

// TestGitCut: end.git's paths and a long detail go before the result is
// cut; the commits, the branch and the diff stat always stay.
func TestGitCut(t *testing.T) {
	branch := "agentrun/fix-0b9ad7a1"
	git := &events.Git{Repository: "https://git.example.com/team/app.git", Ref: "refs/heads/main",
		BaseCommit: strings.Repeat("a", 40), HeadCommit: strings.Repeat("b", 40), Branch: &branch, Pushed: true,
		Commits: 2, FilesChanged: 20, Insertions: 400, Deletions: 70, Detail: strings.Repeat("why ", 300)}
	for i := range 20 {
		git.Paths = append(git.Paths, fmt.Sprintf("src/%02d/%s.go", i, strings.Repeat("p", 150)))
	}
	small := *git
	small.Paths, small.Detail = []string{"main.go"}, ""
	for _, tt := range []struct {
		name    string
		git     *events.Git
		result  string
		wantCut bool
	}{
		{"fits whole", &small, "done", false},
		{"paths and detail go first", git, strings.Repeat("r", 1500), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := end(str(tt.result))
			e.Git = tt.git
			got := roundTrip(t, FromEnd(e, someCounters))
			g := got.Git
			if g == nil || got.GitCut != tt.wantCut || g.HeadCommit != tt.git.HeadCommit || g.Branch == nil || *g.Branch != branch ||
				!g.Pushed || g.Insertions != 400 || g.Commits != 2 {
				t.Fatalf("git %+v cut %v", g, got.GitCut)
			}
			if tt.wantCut {
				if len(g.Paths) != 0 || len(g.Detail) > 256 || got.ResultCut {
					t.Errorf("paths %d, detail %d bytes, result cut %v: want the paths and detail cut before the result", len(g.Paths), len(g.Detail), got.ResultCut)
				}
			} else if !reflect.DeepEqual(g, tt.git) {
				t.Errorf("git %+v, want it whole", g)
			}
			if got.Cut() != tt.wantCut {
				t.Errorf("Cut() = %v", got.Cut())
			}
		})
	}
}
