package chart

import (
	"encoding/json"
	"math/rand"
	"strconv"
	"testing"

	"github.com/stategate/stategate/plugin/internal/config"
	"github.com/tidwall/gjson"
)

// guardOf parses one guard through a workflow that uses it.
func guardOf(t *testing.T, g string) *config.Guard {
	t.Helper()
	doc := `{"version":1,"workflows":[{"id":"w","initial":"a","states":{"a":{"on":{"E":{"target":"b","guard":` + g + `}}},"b":{}}}]}`
	c, problems := config.Parse([]byte(doc))
	if c == nil {
		t.Fatalf("%s: %v", g, problems)
	}
	return c.Workflows[0].States[1].On[0].Guard
}

// TestGuard_neverIsSound: a guard check calls one that can never pass never passes, for
// random conjunctions of comparisons on one value and values around their bounds.
func TestGuard_neverIsSound(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	ops := []string{"eq", "ne", "lt", "lte", "gt", "gte", "in", "exists"}
	values := []string{`0`, `1`, `2`, `3`, `"x"`, `"y"`, `true`, `null`}
	probes := []string{`0`, `0.5`, `1`, `1.5`, `2`, `2.5`, `3`, `4`, `-1`, `"x"`, `"y"`, `true`, `false`, `null`, `[]`, `{}`}
	never := 0
	for n := 0; n < 5000; n++ {
		var parts []any
		for k := 1 + rng.Intn(4); k > 0; k-- {
			op := ops[rng.Intn(len(ops))]
			params := map[string]any{"path": "v", "op": op}
			switch op {
			case "lt", "lte", "gt", "gte":
				params["value"] = json.RawMessage(strconv.Itoa(rng.Intn(4)))
			case "in":
				var l []json.RawMessage
				for m := rng.Intn(3); m > 0; m-- {
					l = append(l, json.RawMessage(values[rng.Intn(len(values))]))
				}
				if l == nil {
					l = []json.RawMessage{}
				}
				params["value"] = l
			case "exists":
			default:
				params["value"] = json.RawMessage(values[rng.Intn(len(values))])
			}
			parts = append(parts, map[string]any{"type": "argument", "params": params})
		}
		raw, _ := json.Marshal(map[string]any{"type": "and", "guards": parts})
		g := guardOf(t, string(raw))
		if !g.Never() {
			continue
		}
		never++
		for _, p := range append(probes, "") {
			args := `{}`
			if p != "" {
				args = `{"v":` + p + `}`
			}
			if Pass(g, &Event{Arguments: gjson.Parse(args)}) {
				t.Fatalf("%s is called never-passing, but passes on %s", raw, args)
			}
		}
	}
	if never < 100 {
		t.Fatalf("only %d of 5000 guards were found never to pass", never)
	}
}
