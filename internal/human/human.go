// Package human renders figures for people to read: the one way the
// command line and the console print a size.
package human

import "fmt"

// Bytes renders a size in binary units: "0 B", "512 B", "1.5 KiB",
// "12.0 MiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
