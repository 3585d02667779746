package domain

import (
	"encoding/json"
	"fmt"
)

// SkillsConfig is one skills entry of a directory's config (docs/api.md section
// 7): where an agent's skills come from.
type SkillsConfig struct {
	Sources []SkillSource
}

// SkillSource is one place skills come from: Type says what Source is (a
// git repository, a local path, ...); the daemon stores it, it does not
// interpret it.
type SkillSource struct {
	Type    string
	Source  string
	Skills  []string // nil when absent
	Ref     *string
	Subpath *string
}

// ParseSkillsConfig reads one skills entry; unknown fields are dropped.
// Errors wrapping ErrConfigSyntax mean b is not JSON.
func ParseSkillsConfig(b []byte) (SkillsConfig, error) {
	obj, err := decodeObject(b)
	if err != nil {
		return SkillsConfig{}, err
	}
	raw, ok, err := obj.get("sources")
	switch {
	case err != nil:
		return SkillsConfig{}, err
	case !ok:
		return SkillsConfig{}, fmt.Errorf("missing field `sources`")
	case kindOf(raw) != "array":
		return SkillsConfig{}, fieldErr("sources", wantType(raw, "an array"))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return SkillsConfig{}, fieldErr("sources", err)
	}
	c := SkillsConfig{Sources: make([]SkillSource, 0, len(items))}
	for i, it := range items {
		s, err := parseSkillSource(it)
		if err != nil {
			return SkillsConfig{}, fieldErr(fmt.Sprintf("sources[%d]", i), err)
		}
		c.Sources = append(c.Sources, s)
	}
	return c, nil
}

func parseSkillSource(raw json.RawMessage) (SkillSource, error) {
	var s SkillSource
	o, err := objectOf(raw)
	if err != nil {
		return s, err
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"type", &s.Type}, {"source", &s.Source}} {
		v, ok, err := o.get(f.name)
		switch {
		case err != nil:
			return s, err
		case !ok:
			return s, fmt.Errorf("missing field `%s`", f.name)
		}
		if *f.dst, err = decodeString(f.name, v); err != nil {
			return s, err
		}
	}
	if v, ok, err := o.get("skills"); err != nil {
		return s, err
	} else if ok {
		if s.Skills, err = decodeStrings("skills", v); err != nil {
			return s, err
		}
	}
	if s.Ref, err = decodeOptString(o, "ref"); err != nil {
		return s, err
	}
	s.Subpath, err = decodeOptString(o, "subpath")
	return s, err
}

// MarshalJSON writes {"sources":[...]} with each source's fields in order.
func (c SkillsConfig) MarshalJSON() ([]byte, error) {
	sources := c.Sources
	if sources == nil {
		sources = []SkillSource{}
	}
	var w orderedJSON
	w.field("sources", sources)
	return w.bytes(), nil
}

// MarshalJSON writes type, source, skills, ref and subpath, omitting absent
// optional fields.
func (s SkillSource) MarshalJSON() ([]byte, error) {
	var w orderedJSON
	w.field("type", s.Type)
	w.field("source", s.Source)
	if s.Skills != nil {
		w.field("skills", s.Skills)
	}
	if s.Ref != nil {
		w.field("ref", *s.Ref)
	}
	if s.Subpath != nil {
		w.field("subpath", *s.Subpath)
	}
	return w.bytes(), nil
}
