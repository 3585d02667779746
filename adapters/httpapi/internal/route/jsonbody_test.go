package route

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// A member encoding/json would decode into the same field as another one
// of its object (a duplicate, a case variant, a long s) is refused; maps
// (names exact) and members that match no field are not.
func TestCheckJSONMembers(t *testing.T) {
	type nested struct {
		Inner struct {
			To string `json:"to"`
		} `json:"inner"`
		List []struct {
			ID int `json:"id"`
		} `json:"list"`
	}
	create := reflect.TypeFor[domain.ProcessCreateRequest]()
	// The shapes of the fs move's body and a terminal frame (fsapi,
	// processapi), whose own routes are tested through the server.
	move := reflect.TypeFor[struct {
		_         struct{} `json:"-" additionalProperties:"true"`
		From      string   `json:"from"`
		To        string   `json:"to"`
		Overwrite *bool    `json:"overwrite,omitempty"`
	}]()
	frame := reflect.TypeFor[struct {
		Type     string `json:"type"`
		Data     string `json:"data"`
		Encoding string `json:"encoding"`
		Cols     int    `json:"cols"`
		Rows     int    `json:"rows"`
	}]()
	tests := []struct {
		name string
		typ  reflect.Type
		body string
		bad  bool
	}{
		{"move", move, `{"from":"a","to":"b"}`, false},
		{"move, destination twice", move, `{"from":"a","to":"b","to":"c"}`, true},
		{"move, destination in capitals", move, `{"from":"a","to":"b","TO":"c"}`, true},
		{"move, only a variant", move, `{"FROM":"a","To":"b"}`, false},
		{"move, escaped variant", move, `{"from":"a","\u0074o":"b","T\u004f":"c"}`, true},
		{"move, overwrite twice", move, `{"from":"a","to":"b","overwrite":false,"overwrite":true}`, true},
		{"unknown members may repeat", move, `{"from":"a","to":"b","x":1,"X":2}`, false},
		{"env names differ by case", create, `{"command":"sh","env":{"PATH":"/bin","path":"x","Path":"y"}}`, false},
		{"command twice by case", create, `{"command":"true","Command":"rm"}`, true},
		{"session id, long s", reflect.TypeFor[struct {
			SessionID string `json:"sessionId"`
		}](), "{\"sessionId\":\"A\",\"\u017fessionId\":\"B\"}", true},
		{"nested object", reflect.TypeFor[nested](), `{"inner":{"to":"a","tO":"b"}}`, true},
		{"nested array", reflect.TypeFor[nested](), `{"list":[{"id":1},{"id":2,"ID":3}]}`, true},
		{"nested fine", reflect.TypeFor[nested](), `{"inner":{"to":"a"},"list":[{"id":1},{"id":2}]}`, false},
		{"terminal frame", frame, `{"type":"input","data":"ls\n","Type":"resize"}`, true},
		{"not JSON is left to huma", create, `{"command":`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckJSONMembers([]byte(tt.body), tt.typ)
			if tt.bad != (err != nil) {
				t.Fatalf("CheckJSONMembers(%s) = %v, want refused %v", tt.body, err, tt.bad)
			}
			if err != nil && (!isKind(err, "invalid_request") || !strings.Contains(err.Error(), "ambiguous")) {
				t.Fatalf("error %v", err)
			}
		})
	}
}
