package wire

import "time"

// Retention is a recording's retention as of a moment: the "retention"
// member of GET /v1/recordings/{id}, and each recording of a sweep's
// report.
type Retention struct {
	ID          string `json:"id"`
	Project     string `json:"project"`
	Class       string `json:"class"`
	Days        int    `json:"days"`
	ExpiresAt   int64  `json:"expires_at"`             // unix ns: finish (or creation) plus the class's days
	HeldUntil   int64  `json:"held_until,omitempty"`   // unix ns an active pin keeps it; -1 without end
	Pins        []Pin  `json:"pins,omitempty"`         // every pin, ended ones included
	Expired     bool   `json:"expired"`                // the class's time is up and no pin holds it
	Why         string `json:"why,omitempty"`          // why it goes: "class expiry" or "pin ended"
	Open        bool   `json:"open,omitempty"`         // still being recorded: never swept
	PolicyError string `json:"policy_error,omitempty"` // the policy failed: kept
}

// Pin keeps a recording beyond its class: until Until (unix ns), or, when
// Until is 0, until it is removed.
type Pin struct {
	ID        string `json:"id"`
	Reason    string `json:"reason"`
	Ref       string `json:"ref,omitempty"` // e.g. acme/storefront#4711
	Until     int64  `json:"until,omitempty"`
	CreatedAt int64  `json:"created_at"`
}

// Active says whether the pin holds at now.
func (p Pin) Active(now time.Time) bool { return p.Until == 0 || now.UnixNano() < p.Until }
