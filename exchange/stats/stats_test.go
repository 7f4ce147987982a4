package stats

import "testing"

// TestLabels: metric labels stay within a bounded set whatever the client sends.
func TestLabels(t *testing.T) {
	for in, want := range map[string]string{"tools/call": "tools/call", "initialize": "initialize", "": LabelNone,
		"x/" + string(make([]byte, 300)): LabelOther, "Tools/Call": LabelOther, "notifications/initialized": "notifications/initialized"} {
		if got := MethodLabel(in); got != want {
			t.Errorf("MethodLabel(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"TOOL_NOT_AVAILABLE": "TOOL_NOT_AVAILABLE", "": LabelOther, "tool_disabled": LabelOther,
		"A\nB": LabelOther, "X" + string(make([]byte, 60)): LabelOther} {
		if got := DenialLabel(in); got != want {
			t.Errorf("DenialLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
