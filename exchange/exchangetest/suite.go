// Package exchangetest is the exchange-level conformance suite: request/answer cases as
// data (cases/*.json), run against every Go host of the exchange core (the gateway through
// net/http, the Envoy filter under proxytest, natively and as the built .wasm), asserting
// the same decision and the same bytes out for every case.
//
// # Notes
//
//   - A case is a sequence of steps on one fresh host (state carries from step to step).
//     A step is one HTTP request; when the upstream is to be called, the step gives its
//     answer (status, media type, body; "{{id}}" in the body stands for the id the upstream
//     received, as a server echoes it).
//   - Each step states by hand what must hold (status, whether the upstream ran, what the
//     answer contains) and carries the exact bytes out ("body", recorded from the gateway
//     with -update and reviewed). Every host must give those bytes.
//   - Durations (dev.stategate/durationMs) and a cache hit's ageMs are set to 0 before
//     comparing; an id the core
//     replaced for the upstream is checked (a string of the client id's length) and then
//     written as "MINTED" before comparing.
//   - Sessions: an upstream answer may carry an Mcp-Session-Id ("session"); a step may say
//     which one the client must get ("session": "minted" for one the gateway issued, "none"
//     for none, else the exact id) and which one the upstream must be sent
//     ("upstreamSession", "none" for none). Each session the gateway issued in a case is
//     "{{session1}}", "{{session2}}", ... ("{{session}}": the latest) in later steps'
//     headers; sessions issued in one case all differ.
//   - A header's value is a string, or an array of strings for a header sent several times
//     (one field line per element, in order): hosts must send each as its own line.
//   - A step's "path" is the request's path and query at the host ("/mcp" when absent); the
//     upstream's answer may carry "headers" of its own, and a step may require the exact
//     values of headers of the answer ("want.headers") and the path and query the upstream
//     was sent ("want.upstreamPath", the upstream being at /mcp of its origin).
//   - A case with "publicUrl" needs a host built with it as its public address (OAuth
//     discovery): RunOptions gives it; a host run by Run leaves such a case out, saying so.
package exchangetest

import (
	"embed"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

//go:embed cases/*.json configs/*.json
var files embed.FS

var update = flag.Bool("update-exchange", false, "record each step's answer bytes from this host into cases/*.json")

// Case is one scenario.
type Case struct {
	Name   string `json:"-"`
	About  string `json:"about"`
	Config string `json:"config"` // a file under configs/
	// PublicURL is the origin the host names in OAuth discovery documents and challenges
	// (HostOptions.PublicURL); "": the host has none.
	PublicURL string `json:"publicUrl,omitempty"`
	Steps     []Step `json:"steps"`
}

// HostOptions are what a case asks of a host besides its configuration.
type HostOptions struct {
	// PublicURL is the host's public origin (the gateway's --public-url, the Envoy filter's
	// and the exchange module's publicUrl); "" for none.
	PublicURL string
}

// Step is one request and what must come of it.
type Step struct {
	Method   string            `json:"method,omitempty"` // HTTP method (default POST)
	Path     string            `json:"path,omitempty"`   // path and query (default /mcp)
	Headers  map[string]Values `json:"headers,omitempty"`
	Body     string            `json:"body,omitempty"`
	Upstream *Answer           `json:"upstream,omitempty"` // the upstream's answer, when it is called
	Want     Want              `json:"want"`
	// Holding, when set, is what a host that can hold a call while a person is asked
	// (RunHolding: host/gateway, which asks 2025-11-25 clients on the call's stream) must
	// give instead of Want.
	Holding *Want `json:"holding,omitempty"`
}

// Values are one header's values in a step: a JSON string is one field line, an array a
// header sent once per element, in order (a repeated header).
type Values []string

// UnmarshalJSON reads a string or an array of strings.
func (v *Values) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*v = Values{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*v = many
	return nil
}

// MarshalJSON writes one value as a string, several as an array.
func (v Values) MarshalJSON() ([]byte, error) {
	if len(v) == 1 {
		return json.Marshal(v[0])
	}
	return json.Marshal([]string(v))
}

// Answer is what the upstream answers.
type Answer struct {
	Status      int    `json:"status"`
	ContentType string `json:"contentType"`
	Body        string `json:"body"`
	Session     string `json:"session,omitempty"` // the answer's Mcp-Session-Id header
	// Headers are more header fields of the answer (WWW-Authenticate).
	Headers map[string]Values `json:"headers,omitempty"`
}

// Want is what the client must get.
type Want struct {
	Status         int      `json:"status"`
	UpstreamCalled bool     `json:"upstreamCalled"`
	IDMinted       bool     `json:"idMinted,omitempty"`     // the upstream saw an id of the core's
	UpstreamBody   string   `json:"upstreamBody,omitempty"` // the exact request body the upstream got
	ContentType    string   `json:"contentType,omitempty"`
	Contains       []string `json:"contains,omitempty"`
	NotContains    []string `json:"notContains,omitempty"`
	// Session is the answer's Mcp-Session-Id: "minted" (one the gateway issued), "none", or
	// the exact id; "" is not checked.
	Session string `json:"session,omitempty"`
	// UpstreamSession is the Mcp-Session-Id the upstream was sent ("none": none; "": not
	// checked).
	UpstreamSession string `json:"upstreamSession,omitempty"`
	// UpstreamPath is the path and query the upstream was sent ("": not checked).
	UpstreamPath string `json:"upstreamPath,omitempty"`
	// Headers are the exact values the answer must carry for each name (an empty array:
	// none); names compare case-insensitively.
	Headers map[string]Values `json:"headers,omitempty"`
	Body    string            `json:"body"` // exact answer bytes (normalised), recorded with -update
}

// Got is what a host did with a step.
type Got struct {
	Status         int
	ContentType    string
	Body           string
	UpstreamCalled bool
	UpstreamBody   string // what the upstream received
	// Session is the answer's Mcp-Session-Id header, UpstreamSession the one the upstream
	// was sent ("" for none).
	Session, UpstreamSession string
	// UpstreamPath is the path and query the upstream was sent; Headers the answer's header
	// fields, in any order and case (a host fills them for cases that check them).
	UpstreamPath string
	Headers      [][2]string
}

// StepPath is the step's request path and query.
func StepPath(s Step) string {
	if s.Path == "" {
		return "/mcp"
	}
	return s.Path
}

// Host runs steps on one fresh host built for a configuration.
type Host interface {
	Do(t *testing.T, s Step) Got
}

// Config returns a configuration file of the suite.
func Config(name string) []byte {
	b, err := files.ReadFile("configs/" + name)
	if err != nil {
		panic(err)
	}
	return b
}

// Cases returns every case, by name.
func Cases() []Case {
	entries, _ := files.ReadDir("cases")
	var out []Case
	for _, e := range entries {
		b, _ := files.ReadFile("cases/" + e.Name())
		var c Case
		if err := json.Unmarshal(b, &c); err != nil {
			panic(e.Name() + ": " + err.Error())
		}
		c.Name = strings.TrimSuffix(e.Name(), ".json")
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Run runs every case on hosts made by newHost, which takes no HostOptions: a case that
// needs one is left out, saying which.
func Run(t *testing.T, newHost func(t *testing.T, config []byte) Host) {
	RunOptions(t, func(t *testing.T, config []byte, o HostOptions) Host {
		if o.PublicURL != "" {
			t.Skip("left out: the case needs a host with a public URL (HostOptions), and this host is run without")
		}
		return newHost(t, config)
	})
}

// RunOptions runs every case on hosts made by newHost with the case's HostOptions.
func RunOptions(t *testing.T, newHost func(t *testing.T, config []byte, o HostOptions) Host) {
	run(t, newHost, false)
}

// RunHolding is RunOptions for a host that can hold a call while a person is asked: a
// step's Holding, when it has one, is what it must give.
func RunHolding(t *testing.T, newHost func(t *testing.T, config []byte, o HostOptions) Host) {
	run(t, newHost, true)
}

func run(t *testing.T, newHost func(t *testing.T, config []byte, o HostOptions) Host, holds bool) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			h := newHost(t, Config(c.Config), HostOptions{PublicURL: c.PublicURL})
			changed := false
			var issued Sessions
			for i := range c.Steps {
				s := &c.Steps[i]
				got := h.Do(t, issued.Resolve(*s))
				body := normalise(t, got, *s)
				want := &s.Want
				if holds && s.Holding != nil {
					want = s.Holding
				}
				seen := *s
				seen.Want = *want
				check(t, i, seen, got, body)
				issued.Check(t, i, seen, got)
				if *update && body != want.Body {
					want.Body, changed = body, true
				} else if body != want.Body {
					t.Errorf("step %d: answer bytes differ from the recorded ones\n got: %s\nwant: %s", i, body, want.Body)
				}
			}
			if changed {
				write(t, c)
			}
		})
	}
}

var (
	durationRE = regexp.MustCompile(`"dev\.stategate/durationMs":[0-9.eE+-]+`)
	// approvalStateRE: the gateway's own requestState is random (a nonce, an expiry).
	approvalStateRE = regexp.MustCompile(`"requestState":"sg1\.[A-Za-z0-9_.-]+"`)
	cacheAgeRE      = regexp.MustCompile(`("dev\.stategate/cache":\{"hit":true,"ageMs":)[0-9]+`)
)

func normalise(t *testing.T, got Got, s Step) string {
	out := durationRE.ReplaceAllString(got.Body, `"dev.stategate/durationMs":0`)
	out = approvalStateRE.ReplaceAllString(out, `"requestState":"sg1.X"`)
	return cacheAgeRE.ReplaceAllString(out, `${1}0`)
}

func check(t *testing.T, i int, s Step, got Got, body string) {
	t.Helper()
	w := s.Want
	if got.Status != w.Status {
		t.Errorf("step %d: status %d, want %d (%s)", i, got.Status, w.Status, got.Body)
	}
	if got.UpstreamCalled != w.UpstreamCalled {
		t.Errorf("step %d: upstream called %v, want %v", i, got.UpstreamCalled, w.UpstreamCalled)
	}
	if w.ContentType != "" && !strings.HasPrefix(got.ContentType, w.ContentType) {
		t.Errorf("step %d: content type %q, want %q", i, got.ContentType, w.ContentType)
	}
	up := got.UpstreamBody
	if w.IDMinted {
		sent, client := gjson.Get(up, "id"), gjson.Get(s.Body, "id")
		if sent.Type != gjson.String || len(sent.Raw) != len(client.Raw) || sent.Raw == client.Raw {
			t.Errorf("step %d: upstream got id %s for the client's %s; want a minted string of the same length", i, sent.Raw, client.Raw)
		}
		up, _ = sjson.Set(up, "id", "MINTED")
	}
	if w.UpstreamBody != "" && up != w.UpstreamBody {
		t.Errorf("step %d: upstream got\n%s\nwant\n%s", i, up, w.UpstreamBody)
	}
	if w.UpstreamPath != "" && got.UpstreamPath != w.UpstreamPath {
		t.Errorf("step %d: upstream was sent path %q, want %q", i, got.UpstreamPath, w.UpstreamPath)
	}
	for name, want := range w.Headers {
		var have []string
		for _, f := range got.Headers {
			if strings.EqualFold(f[0], name) {
				have = append(have, f[1])
			}
		}
		if !slices.Equal(have, []string(want)) && !(len(have) == 0 && len(want) == 0) {
			t.Errorf("step %d: answer's %s %q, want %q", i, name, have, want)
		}
	}
	for _, c := range w.Contains {
		if !strings.Contains(body, c) {
			t.Errorf("step %d: answer lacks %q:\n%s", i, c, body)
		}
	}
	for _, c := range w.NotContains {
		if strings.Contains(body, c) {
			t.Errorf("step %d: answer has %q:\n%s", i, c, body)
		}
	}
}

func write(t *testing.T, c Case) {
	_, self, _, _ := runtime.Caller(0)
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(b)))
	if err := os.WriteFile(filepath.Join(filepath.Dir(self), "cases", c.Name+".json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// UpstreamAnswer returns the step's upstream answer body with "{{id}}" replaced by the id
// in what the upstream received.
func UpstreamAnswer(s Step, received []byte) string {
	id := gjson.GetBytes(received, "id").Raw
	if id == "" {
		id = "null"
	}
	return strings.ReplaceAll(s.Upstream.Body, "{{id}}", id)
}

// Sessions are the sessions the gateway issued so far in one case.
type Sessions []string

// Resolve returns s with "{{sessionN}}" and "{{session}}" in its headers replaced by the
// sessions issued so far (s itself is not changed).
func (ss Sessions) Resolve(s Step) Step {
	if len(s.Headers) == 0 {
		return s
	}
	h := make(map[string]Values, len(s.Headers))
	for k, vs := range s.Headers {
		out := make(Values, len(vs))
		for j, v := range vs {
			for i := len(ss); i >= 1; i-- { // {{session12}} before {{session1}}
				v = strings.ReplaceAll(v, "{{session"+strconv.Itoa(i)+"}}", ss[i-1])
			}
			if len(ss) > 0 {
				v = strings.ReplaceAll(v, "{{session}}", ss[len(ss)-1])
			}
			out[j] = v
		}
		h[k] = out
	}
	s.Headers = h
	return s
}

// SessionPrefix starts every session the gateway issues (session.Prefix).
const SessionPrefix = "stategate."

// Check checks the step's sessions (Want.Session, Want.UpstreamSession) against what the
// host did, and keeps a session the gateway issued.
func (ss *Sessions) Check(t *testing.T, i int, s Step, got Got) {
	t.Helper()
	switch w := s.Want.Session; w {
	case "":
	case "none":
		if got.Session != "" {
			t.Errorf("step %d: answer carries Mcp-Session-Id %q, want none", i, got.Session)
		}
	case "minted":
		if !strings.HasPrefix(got.Session, SessionPrefix) || len(got.Session) != len(SessionPrefix)+43 {
			t.Errorf("step %d: answer carries Mcp-Session-Id %q, want one the gateway issued", i, got.Session)
		} else if slices.Contains(*ss, got.Session) {
			t.Errorf("step %d: the gateway issued session %q a second time", i, got.Session)
		}
		*ss = append(*ss, got.Session)
	default:
		if got.Session != w {
			t.Errorf("step %d: answer carries Mcp-Session-Id %q, want %q", i, got.Session, w)
		}
	}
	switch w := s.Want.UpstreamSession; w {
	case "":
	case "none":
		if got.UpstreamSession != "" {
			t.Errorf("step %d: the upstream was sent Mcp-Session-Id %q, want none", i, got.UpstreamSession)
		}
	default:
		if got.UpstreamSession != ss.resolve(w) {
			t.Errorf("step %d: the upstream was sent Mcp-Session-Id %q, want %q", i, got.UpstreamSession, w)
		}
	}
}

func (ss Sessions) resolve(v string) string {
	return ss.Resolve(Step{Headers: map[string]Values{"": {v}}}).Headers[""][0]
}
