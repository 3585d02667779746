package route

import (
	"mime"
	"strings"
)

// Accepts reports whether an Accept header value allows mediaType. An empty
// header accepts anything; "type/*" and "*/*" count; q=0 excludes.
func Accepts(header, mediaType string) bool {
	if strings.TrimSpace(header) == "" {
		return true
	}
	major, _, _ := strings.Cut(mediaType, "/")
	for _, part := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if q := strings.TrimSpace(params["q"]); q == "0" || q == "0.0" || q == "0.00" || q == "0.000" {
			continue
		}
		if mt == mediaType || mt == "*/*" || mt == major+"/*" {
			return true
		}
	}
	return false
}

// IsMediaType reports whether a Content-Type value names mediaType,
// parameters such as charset allowed.
func IsMediaType(header, mediaType string) bool {
	mt, _, err := mime.ParseMediaType(header)
	return err == nil && mt == mediaType
}
