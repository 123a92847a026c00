package event

import (
	"testing"

	"github.com/flightrec/flightrec/internal/jsonspan"
)

// TestRRWebMutationChecks: what the one rrweb model accepts and refuses,
// for redaction and the player alike, with the path it names.
func TestRRWebMutationChecks(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{`{}`, ""},
		{`{"removes":null,"adds":null,"texts":null,"attributes":null}`, ""},
		{`{"adds":[{"parentId":1,"nextId":-1,"previousId":null,"node":{"type":3,"id":5,"textContent":null,"childNodes":null}}]}`, ""},
		{`{"removes":{}}`, "removes: is an object, not an array"},
		{`{"removes":[1]}`, "removes[0]: is a number, not an object"},
		{`{"removes":[{"id":"1"}]}`, "removes[0].id: is a string, not an integer"},
		{`{"adds":[{"parentId":1,"nextId":"x","node":{"type":3,"id":5}}]}`, "adds[0].nextId: is a string, not an integer or null"},
		{`{"adds":[{"parentId":1,"node":{"type":7,"id":5}}]}`, "adds[0].node.type: unknown node type 7"},
		{`{"adds":[{"parentId":1,"node":{"type":2,"id":5,"tagName":"p","childNodes":[{"type":3,"id":6,"textContent":1}]}}]}`, "adds[0].node.childNodes[0].textContent: is a number, not a string"},
		{`{"adds":[{"parentId":1,"node":{"type":3,"id":5,"childNodes":[{"id":6}]}}]}`, "adds[0].node.childNodes[0].type: is missing, not an integer"},
		{`{"adds":[{"parentId":1,"node":{"type":2,"id":5,"tagName":"p","attributes":[]}}]}`, "adds[0].node.attributes: is an array, not an object"},
		{`{"adds":[{"parentId":1,"node":{"type":2,"id":5.5,"tagName":"p"}}]}`, "adds[0].node.id: is not an integer"},
		{`{"texts":[{"id":1,"value":5}]}`, "texts[0].value: is a number, not a string"},
		{`{"attributes":[{"id":1,"attributes":null}]}`, "attributes[0].attributes: is null, not an object"},
	} {
		var d jsonspan.Doc
		if err := d.Parse([]byte(c.data)); err != nil {
			t.Fatal(err)
		}
		var m RRWebMutationOps
		err := m.Decode(&d, 0, nil)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.data, got, c.want)
		}
	}
}

// TestRRWebVisitSeesEveryID: visit sees each node's id in document order
// and its refusal names the node.
func TestRRWebVisitSeesEveryID(t *testing.T) {
	var d jsonspan.Doc
	src := `{"adds":[{"parentId":1,"node":{"type":2,"id":5,"tagName":"p","childNodes":[{"type":3,"id":6},{"type":3,"id":5}]}}]}`
	if err := d.Parse([]byte(src)); err != nil {
		t.Fatal(err)
	}
	var seen []int64
	visit := func(id int64) *RRWebError {
		for _, s := range seen {
			if s == id {
				return RRWebErrorf("appears twice in the event")
			}
		}
		seen = append(seen, id)
		return nil
	}
	var m RRWebMutationOps
	err := m.Decode(&d, 0, visit)
	if err == nil || err.Error() != "adds[0].node.childNodes[1].id: appears twice in the event" {
		t.Errorf("Decode = %v", err)
	}
	if len(seen) != 2 || seen[0] != 5 || seen[1] != 6 {
		t.Errorf("visited %v, want [5 6]", seen)
	}
}
