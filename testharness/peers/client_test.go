package peers_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The load generator: one MCP client over Streamable HTTP, the same for every row. It opens
// a session as a client does (initialize, then notifications/initialized) and then posts the
// same request bytes to every row; only the JSON-RPC id changes from one request to the next,
// in the same sequence and at the same width for every row. An answer counts only when it is
// the request's own JSON-RPC result (as JSON or as an SSE event) with the upstream's content.

const protocolVersion = "2025-11-25"

// authToken is sent as a bearer token to every row: Docker's gateway requires one on its
// streaming transport (MCP_GATEWAY_AUTH_TOKEN); the others ignore it.
const authToken = "stategate-peers-bench"

var httpClient = &http.Client{
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
	Timeout:   30 * time.Second,
}

// idBase makes every id nine digits wide, so a row's requests are byte for byte the same
// length whatever the count.
const idBase = 100_000_000

func callBody(id int64) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(idBase+id, 10) + `,"method":"tools/call","params":{"name":"users.get","arguments":{"id":"u1"}}}`)
}

func listBody(id int64) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(idBase+id, 10) + `,"method":"tools/list"}`)
}

// session is one client's session with one row.
type session struct {
	url, sid, proto string
	role            string // what the session is for, in error messages
}

func (s *session) post(body []byte, initialize bool) (*http.Response, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+authToken)
	if !initialize {
		req.Header.Set("MCP-Protocol-Version", s.proto)
		if s.sid != "" {
			req.Header.Set("Mcp-Session-Id", s.sid)
		}
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b, err
}

// open initialises a session with the row at url.
func open(url string) (*session, error) {
	s := &session{url: url, proto: protocolVersion}
	init := []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + protocolVersion +
		`","capabilities":{},"clientInfo":{"name":"stategate-peers-bench","version":"1.0.0"}}}`)
	resp, body, err := s.post(init, true)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("initialize: status %d: %.300s", resp.StatusCode, body)
	}
	res, err := result(resp.Header.Get("Content-Type"), body, 0)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	var ir struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(res, &ir); err != nil || ir.ProtocolVersion == "" {
		return nil, fmt.Errorf("initialize: no protocolVersion in %.300s", res)
	}
	s.proto = ir.ProtocolVersion
	s.sid = resp.Header.Get("Mcp-Session-Id")
	resp, body, err = s.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), false)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("notifications/initialized: status %d: %.300s", resp.StatusCode, body)
	}
	return s, nil
}

// holdStream opens the session's GET stream, as the official SDKs' clients do after
// initialize, and reads it (discarding its events) until the benchmark ends.
func (s *session) holdStream(b testing.TB) error {
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		cancel()
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+authToken)
	req.Header.Set("MCP-Protocol-Version", s.proto)
	req.Header.Set("Mcp-Session-Id", s.sid)
	resp, err := (&http.Client{Transport: httpClient.Transport}).Do(req) // no timeout: it stays open
	if err != nil {
		cancel()
		return fmt.Errorf("GET stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return fmt.Errorf("GET stream: status %d", resp.StatusCode)
	}
	go io.Copy(io.Discard, resp.Body)
	b.Cleanup(func() { cancel(); resp.Body.Close() })
	return nil
}

// timed posts body and returns how long the whole answer took to arrive, and the answer's
// result (checked after the clock stopped).
func (s *session) timed(body []byte, id int64) (time.Duration, json.RawMessage, error) {
	start := time.Now()
	resp, b, err := s.post(body, false)
	d := time.Since(start)
	if err != nil {
		return d, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return d, nil, fmt.Errorf("status %d: %.300s", resp.StatusCode, b)
	}
	res, err := result(resp.Header.Get("Content-Type"), b, idBase+id)
	return d, res, err
}

// result finds the JSON-RPC response with id in an answer, JSON or an SSE stream, and
// returns its result; an error response or no response is an error.
func result(contentType string, body []byte, id int64) (json.RawMessage, error) {
	var msgs [][]byte
	if strings.HasPrefix(contentType, "text/event-stream") {
		var data []byte
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			switch {
			case len(line) == 0:
				if data != nil {
					msgs = append(msgs, data)
					data = nil
				}
			case bytes.HasPrefix(line, []byte("data:")):
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
			}
		}
		if data != nil {
			msgs = append(msgs, data)
		}
	} else {
		msgs = [][]byte{body}
	}
	for _, m := range msgs {
		var r struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(m, &r) != nil || string(r.ID) != strconv.FormatInt(id, 10) {
			continue
		}
		if r.Error != nil {
			return nil, fmt.Errorf("JSON-RPC error: %.300s", r.Error)
		}
		if r.Result == nil {
			return nil, fmt.Errorf("no result: %.300s", m)
		}
		return r.Result, nil
	}
	return nil, fmt.Errorf("no response with id %d in the answer (%s): %.300s", id, contentType, body)
}

// callText is the text of a tools/call result, which must not be an error result.
func callText(res json.RawMessage) (string, error) {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return "", err
	}
	if r.IsError {
		return "", fmt.Errorf("isError: %.300s", res)
	}
	if len(r.Content) == 0 || r.Content[0].Type != "text" {
		return "", fmt.Errorf("no text content: %.300s", res)
	}
	return r.Content[0].Text, nil
}

// toolNames are the names in a tools/list result.
func toolNames(res json.RawMessage) ([]string, error) {
	var r struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, err
	}
	names := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		names[i] = t.Name
	}
	return names, nil
}

// reference is what a valid answer holds: the upstream's own.
type reference struct {
	callText string
	tools    map[string]bool
}

func (ref *reference) checkCall(res json.RawMessage) error {
	text, err := callText(res)
	if err != nil {
		return err
	}
	if text != ref.callText {
		return fmt.Errorf("call text %.200q, the upstream's is %.200q", text, ref.callText)
	}
	return nil
}

// checkList requires every upstream tool in the list but those the row hides by design (a
// gateway may add tools of its own).
func (ref *reference) checkList(res json.RawMessage, hidden map[string]bool) (int, error) {
	names, err := toolNames(res)
	if err != nil {
		return 0, err
	}
	seen := 0
	for _, n := range names {
		if ref.tools[n] && !hidden[n] {
			seen++
		}
	}
	want := 0
	for n := range ref.tools {
		if !hidden[n] {
			want++
		}
	}
	if seen != want {
		return len(names), fmt.Errorf("tools/list has %d of the %d upstream tools it should show (%d in all)", seen, want, len(names))
	}
	return len(names), nil
}

func fetchReference(url string) (*reference, int, error) {
	s, err := open(url)
	if err != nil {
		return nil, 0, err
	}
	_, res, err := s.timed(callBody(1), 1)
	if err != nil {
		return nil, 0, err
	}
	text, err := callText(res)
	if err != nil {
		return nil, 0, err
	}
	resp, body, err := s.post(listBody(2), false)
	if err != nil {
		return nil, 0, err
	}
	res, err = result(resp.Header.Get("Content-Type"), body, idBase+2)
	if err != nil {
		return nil, 0, err
	}
	names, err := toolNames(res)
	if err != nil {
		return nil, 0, err
	}
	if len(names) == 0 {
		return nil, 0, errors.New("the upstream lists no tools")
	}
	ref := &reference{callText: text, tools: map[string]bool{}}
	for _, n := range names {
		ref.tools[n] = true
	}
	return ref, len(body), nil
}
