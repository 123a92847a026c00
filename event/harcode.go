package event

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// ErrorCode reads the error code of a JSON error body: {"error":"X"},
// {"error":{"code":"X"}} or {"code":"X"} ("" for any other body, or one
// over the stored cap). It is the code failure signatures, evidence cards
// and agents name a failed request by ("GIFT_CARD_STATE").
func (c HARContent) ErrorCode() string {
	text := c.Text
	if text == "" || len(text) > MaxHARBody {
		return ""
	}
	if c.Encoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			return ""
		}
		text = string(b)
	}
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "{") && !strings.Contains(c.MimeType, "json") {
		return ""
	}
	var body struct {
		Error json.RawMessage `json:"error"`
		Code  json.RawMessage `json:"code"`
	}
	if json.Unmarshal([]byte(text), &body) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(body.Error, &s) == nil && s != "" {
		return clipCode(s)
	}
	var obj struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(body.Error, &obj) == nil && obj.Code != "" {
		return clipCode(obj.Code)
	}
	if json.Unmarshal(body.Code, &s) == nil && s != "" {
		return clipCode(s)
	}
	return ""
}

func clipCode(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}
