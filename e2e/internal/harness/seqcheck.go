package harness

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// SeqChecker follows a reader's position through the frames of one ACP
// stream and says when an event was lost. An event must be the one right
// after the position. A gap frame (no id) must start at the position
// (lastEventId) and moves it to just before oldestAvailable. Two gap frames
// in a row are legitimate and contiguous: the reader fell behind the buffer
// again before it read the event the first one pointed to, so the second
// starts where the first ended (the position is then oldestAvailable-1 of
// the first, not the id of the last event read).
type SeqChecker struct {
	Pos        uint64 // id of the last event read, or where the last gap ended
	Gaps       int    // gap frames seen
	BackToBack int    // gap frames right after another gap frame
	afterGap   bool   // the last frame was a gap
}

// Frame checks one frame and advances the position.
func (c *SeqChecker) Frame(ev Event) error {
	if ev.ID == "" {
		var g struct {
			Method string
			Params struct {
				LastEventID     uint64 `json:"lastEventId"`
				OldestAvailable uint64 `json:"oldestAvailable"`
			}
		}
		if err := json.Unmarshal([]byte(ev.Data), &g); err != nil || g.Method != "_adapter/replay_gap" {
			return fmt.Errorf("frame without id is not a gap: %.200s", ev.Data)
		}
		if g.Params.LastEventID != c.Pos {
			return fmt.Errorf("gap says last %d, reader was at %d", g.Params.LastEventID, c.Pos)
		}
		if g.Params.OldestAvailable <= g.Params.LastEventID+1 {
			return fmt.Errorf("gap from %d to %d loses nothing", g.Params.LastEventID, g.Params.OldestAvailable)
		}
		c.Pos = g.Params.OldestAvailable - 1
		c.Gaps++
		if c.afterGap {
			c.BackToBack++
		}
		c.afterGap = true
		return nil
	}
	id, err := strconv.ParseUint(ev.ID, 10, 64)
	if err != nil {
		return fmt.Errorf("bad id %q", ev.ID)
	}
	if id != c.Pos+1 {
		return fmt.Errorf("silent skip from %d to %d", c.Pos, id)
	}
	c.Pos = id
	c.afterGap = false
	return nil
}
