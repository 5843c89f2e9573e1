// Package control lets another shell change a running prsync through a private Unix socket: its number of rsyncs, its bandwidth limit, pause, resume and status.
package control

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The wire protocol: the client connects to the socket and writes one request, a JSON
// object on one line; the server writes one reply, a JSON object on one line, and closes
// the connection. One request per connection.
//
//	-> {"cmd":"jobs","arg":"4"}
//	<- {"ok":true,"pid":4242,"cmd":"jobs","old":8,"new":4}
//	-> {"cmd":"bwlimit","arg":"08:00,20M 19:00,200M 23:00,off"}
//	<- {"ok":true,"pid":4242,"cmd":"bwlimit","old":"off","new":"08:00,20M 19:00,200M 23:00,off"}
//	-> {"cmd":"status"}
//	<- {"ok":true,"pid":4242,"cmd":"status","status":{"pid":4242,"jobs":8,...}}
//	-> {"cmd":"frobnicate"}
//	<- {"ok":false,"pid":4242,"error":"unknown command \"frobnicate\"","hint":"..."}
//
// Fields are only ever added, never renamed or removed; readers ignore fields they do
// not know.
const (
	// MaxRequest is the longest request line the server reads, without its newline.
	MaxRequest = 4096
	// Timeout bounds how long the server waits for a request, and for a reply to be
	// written, so that a stuck client cannot hold the run.
	Timeout = 5 * time.Second
)

// The commands.
const (
	CmdStatus  = "status"
	CmdJobs    = "jobs"
	CmdBWLimit = "bwlimit"
	CmdPause   = "pause"
	CmdResume  = "resume"
)

// Request is one line the client sends.
type Request struct {
	Cmd string `json:"cmd"`
	Arg string `json:"arg,omitempty"`
}

// Reply is one line the server sends back.
type Reply struct {
	OK bool `json:"ok"`
	// PID is the process ID of the prsync that answered.
	PID   int    `json:"pid,omitempty"`
	Cmd   string `json:"cmd,omitempty"`
	Error string `json:"error,omitempty"`
	Hint  string `json:"hint,omitempty"`
	// Old and New are the setting before and after jobs (numbers) or bwlimit (strings).
	Old    any     `json:"old,omitempty"`
	New    any     `json:"new,omitempty"`
	Status *Status `json:"status,omitempty"`
}

// Status is what the status command reports: a snapshot of the run.
type Status struct {
	PID int `json:"pid"`
	// Jobs is the number of rsyncs allowed at once; MaxJobs the most that jobs may set;
	// JobsAuto says -j auto is tuning Jobs.
	Jobs     int  `json:"jobs"`
	MaxJobs  int  `json:"max_jobs"`
	JobsAuto bool `json:"jobs_auto"`
	// Running is the number of rsyncs running, Suspended how many of them are stopped
	// (by pause or by the CPU throttle).
	Running   int `json:"running"`
	Suspended int `json:"suspended"`
	// Paused says prsync ctl pause is in effect.
	Paused bool `json:"paused"`
	// BWLimit is the bandwidth limit as set: "off", a rate or a timetable; BWLimitNow is
	// the rate a timetable gives now.
	BWLimit    string `json:"bwlimit"`
	BWLimitNow string `json:"bwlimit_now,omitempty"`
	// The counts, as in the progress event.
	FilesDone   int64   `json:"files_done"`
	BytesDone   int64   `json:"bytes_done"`
	FilesQueued int64   `json:"files_queued"`
	FilesFailed int64   `json:"files_failed"`
	InputDone   bool    `json:"input_done"`
	RateBps     float64 `json:"rate_bps"`
	Elapsed     float64 `json:"elapsed"`
}

// Handler is what a running prsync does for the commands. The server calls it on its own
// goroutines, possibly several at once, while the run goes on: it must be safe for
// concurrent use. An error is sent back as the reply's error, with its hint if it has a
// HintText() string method (as *Error has).
type Handler interface {
	// Status reports the run; the server fills in a zero PID.
	Status() (Status, error)
	// SetJobs sets the number of rsyncs allowed at once (n >= 1) and reports the number
	// before and after (which may differ from n, such as when clamped to --max-jobs).
	SetJobs(n int) (old, new int, err error)
	// SetBWLimit sets the bandwidth limit to spec: a rate such as "20M", a timetable
	// such as "08:00,20M 19:00,200M 23:00,off", or "off". It parses spec itself.
	SetBWLimit(spec string) (old, new string, err error)
	// Pause stops every rsync until Resume.
	Pause() error
	Resume() error
}

// Error is an error with a hint for the user, for a Handler to return.
type Error struct {
	Msg, Hint string
}

func (e *Error) Error() string { return e.Msg }

// HintText returns the hint.
func (e *Error) HintText() string { return e.Hint }

// hintOf returns the hint of err, if it has one.
func hintOf(err error) string {
	var h interface{ HintText() string }
	if errors.As(err, &h) {
		return h.HintText()
	}
	return ""
}

const commandsHint = "the commands are status, jobs N, bwlimit RATE|TIMETABLE|off, pause and resume"

// parseJobs reads the argument of jobs: a number of rsyncs, at least 1.
func parseJobs(arg string) (int, error) {
	s := strings.TrimSpace(arg)
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, &Error{Msg: fmt.Sprintf("bad jobs %q: want a number of rsyncs, at least 1", s), Hint: "as in: prsync ctl jobs 4"}
	}
	return n, nil
}
