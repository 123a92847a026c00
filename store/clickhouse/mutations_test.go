package clickhouse

import "testing"

func TestParsePart(t *testing.T) {
	for name, want := range map[string]part{
		"all_2_2_0":    {"all", 2},
		"all_1_7_2":    {"all", 1},
		"all_1_7_2_9":  {"all", 9},
		"201901_3_3_0": {"201901", 3},
	} {
		if p, ok := parsePart(name); !ok || p != want {
			t.Errorf("parsePart(%q) = %+v, %v; want %+v", name, p, ok, want)
		}
	}
	for _, bad := range []string{"all", "all_1_2", "all_x_2_0", "a_b_1_2_3_4"} {
		if p, ok := parsePart(bad); ok {
			t.Errorf("parsePart(%q) = %+v, want refused", bad, p)
		}
	}
}
