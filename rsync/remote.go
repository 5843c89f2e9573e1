package rsync

import (
	"net"
	"strconv"
	"strings"
)

// IsDaemon reports whether an rsync source or destination is an rsync daemon
// (host::module or rsync://).
func IsDaemon(arg string) bool {
	if strings.HasPrefix(arg, "rsync://") {
		return true
	}
	i := strings.Index(arg, "::")
	return i > 0 && !strings.Contains(arg[:i], "/")
}

// IsRemote reports whether an rsync destination is on another host (host:path,
// host::module or rsync://).
func IsRemote(dest string) bool {
	if strings.HasPrefix(dest, "rsync://") {
		return true
	}
	i := strings.IndexByte(dest, ':')
	if i < 0 {
		return false
	}
	slash := strings.IndexByte(dest, '/')
	return slash < 0 || i < slash
}

// Endpoint is a remote rsync source or destination (IsRemote), as rsync reaches it.
type Endpoint struct {
	Daemon bool   // rsync://HOST/MODULE or HOST::MODULE; else HOST:PATH over a remote shell
	User   string // before @, or ""
	Host   string
	Port   int    // the daemon's port: rsync://HOST:PORT, else --port, else 873
	Module string // a daemon's module
}

// Addr is the daemon's address, HOST:PORT.
func (e Endpoint) Addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// Login is USER@HOST, or HOST.
func (e Endpoint) Login() string {
	if e.User != "" {
		return e.User + "@" + e.Host
	}
	return e.Host
}

// ParseEndpoint reads a remote rsync argument (IsRemote): rsync://[USER@]HOST[:PORT]/MODULE/PATH,
// [USER@]HOST::MODULE/PATH or [USER@]HOST:PATH. args are rsync's options, for --port.
func ParseEndpoint(s string, args []string) Endpoint {
	var e Endpoint
	if rest, ok := strings.CutPrefix(s, "rsync://"); ok {
		e.Daemon = true
		hostPort, path, _ := strings.Cut(rest, "/")
		e.Module, _, _ = strings.Cut(path, "/")
		e.User, hostPort = cutUser(hostPort)
		if h, p, err := net.SplitHostPort(hostPort); err == nil {
			e.Host = h
			e.Port, _ = strconv.Atoi(p)
		} else {
			e.Host = strings.Trim(hostPort, "[]")
		}
	} else {
		i := strings.IndexByte(s, ':')
		e.User, e.Host = cutUser(s[:max(i, 0)])
		if strings.HasPrefix(s[i:], "::") {
			e.Daemon = true
			e.Module, _, _ = strings.Cut(s[i+2:], "/")
		}
		e.Host = strings.Trim(e.Host, "[]")
	}
	if e.Daemon && e.Port == 0 {
		e.Port = optionPort(args)
	}
	return e
}

func cutUser(s string) (user, host string) {
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return "", s
}

// optionPort is --port=N of rsync's options, else 873.
func optionPort(args []string) int {
	port := 873
	for i, a := range args {
		switch {
		case a == "--":
			return port
		case strings.HasPrefix(a, "--port="):
			if n, err := strconv.Atoi(a[len("--port="):]); err == nil {
				port = n
			}
		case a == "--port" && i+1 < len(args):
			if n, err := strconv.Atoi(args[i+1]); err == nil {
				port = n
			}
		}
	}
	return port
}

// RemoteShell returns the remote shell rsync would use (-e or --rsh in args, else rsh, the
// value of $RSYNC_RSH, else ssh), as words, and whether args gave it: a daemon reached
// through a remote shell has no TCP greeting to read.
func RemoteShell(args []string, rsh string) ([]string, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			i = len(args)
		case a == "-e" || a == "--rsh":
			if i+1 < len(args) {
				return strings.Fields(args[i+1]), true
			}
		case strings.HasPrefix(a, "--rsh="):
			return strings.Fields(a[len("--rsh="):]), true
		case strings.HasPrefix(a, "-e") && len(a) > 2 && ShortFlags(a) == "e":
			return strings.Fields(a[2:]), true
		}
	}
	if rsh != "" {
		return strings.Fields(rsh), false
	}
	return []string{"ssh"}, false
}

// RsyncPath is the far side's rsync command of args (--rsync-path), else rsync.
func RsyncPath(args []string) string {
	for i, a := range args {
		switch {
		case a == "--":
			return "rsync"
		case strings.HasPrefix(a, "--rsync-path="):
			return a[len("--rsync-path="):]
		case a == "--rsync-path" && i+1 < len(args):
			return args[i+1]
		}
	}
	return "rsync"
}

// DaemonURL is the rsync:// argument of a daemon's module, at addr (HOST:PORT), logged in
// as user when it is not "".
func DaemonURL(user, addr, module string) string {
	if user != "" {
		return "rsync://" + user + "@" + addr + "/" + module + "/"
	}
	return "rsync://" + addr + "/" + module + "/"
}
