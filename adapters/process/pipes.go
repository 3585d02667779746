package process

import (
	"os"
)

// stdio is a child's standard streams on OS pipes, shared by the agent
// Runner and the processes Starter: the child's ends go to the launch,
// the parent keeps the others, and a start that fails closes every end
// opened so far.
type stdio struct {
	inR, inW   *os.File // nil when the child's stdin is /dev/null
	outR, outW *os.File
	errR, errW *os.File
	files      []*os.File // every end opened, for closeAll
}

// pipe opens one more pipe whose ends closeAll also closes.
func (s *stdio) pipe() (*os.File, *os.File, error) {
	pr, pw, err := os.Pipe()
	if err == nil {
		s.files = append(s.files, pr, pw)
	}
	return pr, pw, err
}

// open opens stdout and stderr, and stdin when withStdin. On failure the
// caller closes what was opened with closeAll.
func (s *stdio) open(withStdin bool) error {
	var err error
	if withStdin {
		if s.inR, s.inW, err = s.pipe(); err != nil {
			return err
		}
	}
	if s.outR, s.outW, err = s.pipe(); err != nil {
		return err
	}
	s.errR, s.errW, err = s.pipe()
	return err
}

// started closes the child's ends once it has started: the child has its
// own copies now.
func (s *stdio) started() {
	if s.inR != nil {
		s.inR.Close()
	}
	s.outW.Close()
	s.errW.Close()
}

// closeAll closes every end opened (a start that failed).
func (s *stdio) closeAll() {
	for _, f := range s.files {
		f.Close()
	}
}
