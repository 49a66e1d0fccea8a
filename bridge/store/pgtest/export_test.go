package pgtest

// NewServer starts a server that no test owns, for the process that is
// killed to show its server does not outlive it, and for benchmarks.
func NewServer() (*Server, error) { return newServer(func(string, ...any) {}) }

// DataDir is the server's data directory.
func (s *Server) DataDir() string { return s.data }

// Close stops the server and deletes its files.
func (s *Server) Close() { s.close() }

// SetTemplate turns the cached template cluster on or off and returns a
// function that restores the previous setting.
func SetTemplate(on bool) (restore func()) {
	old := useTemplate
	useTemplate = on
	return func() { useTemplate = old }
}
