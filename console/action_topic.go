package console

// Topic actions: create a topic, and alter one (settings, partition
// count). They are the API's calls (CreateTopic, AlterTopicConfig,
// AddPartitions), so the broker validates them exactly as it does for
// `strata topic create` and `strata topic alter`, and they need what those
// need: admin on the topic. Every POST has passed checkPost (CSRF token,
// same origin) before it gets here.

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

type topicFormData struct {
	Name              string
	Partitions        string
	ReplicationFactor string
	Settings          string
	Delete            string
	Message           string
	// Alter: the form alters an existing topic.
	Alter bool
	// Current is the topic's partition count, when altering.
	Current int
}

// parseSettings reads "key=value" pairs, one a line or comma-separated,
// as the CLI's --config does.
func parseSettings(text string) (map[string]string, error) {
	out := map[string]string{}
	for _, line := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == ',' }) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, badRequest("setting %q: want key=value", line)
		}
		if _, dup := out[k]; dup {
			return nil, badRequest("setting %s is given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

// newTopicPage is the create form.
func (c *console) newTopicPage(r *http.Request, v *viewer) (view, error) {
	return view{Template: "topic_form", Title: "Create a topic", Nav: "topics", Data: topicFormData{Partitions: "1"}}, nil
}

// createTopic creates the topic the form describes.
func (c *console) createTopic(r *http.Request, v *viewer) (view, string, error) {
	f := topicFormData{Name: strings.TrimSpace(r.PostFormValue("name")), Partitions: r.PostFormValue("partitions"),
		ReplicationFactor: r.PostFormValue("replication_factor"), Settings: r.PostFormValue("settings")}
	fail := func(err error) (view, string, error) {
		_, f.Message = refusal(err)
		return view{Template: "topic_form", Title: "Create a topic", Nav: "topics", Data: f}, "", err
	}
	if err := v.may("console create topic", broker.Needs(broker.TopicNeed(f.Name, security.OpAdmin))); err != nil {
		return fail(err)
	}
	partitions, err := strconv.ParseInt(strings.TrimSpace(f.Partitions), 10, 32)
	if err != nil {
		return fail(badRequest("partitions %q: want a number", f.Partitions))
	}
	rf := int64(0) // the broker's default
	if s := strings.TrimSpace(f.ReplicationFactor); s != "" {
		if rf, err = strconv.ParseInt(s, 10, 32); err != nil {
			return fail(badRequest("replication factor %q: want a number, or nothing for the default", s))
		}
	}
	settings, err := parseSettings(f.Settings)
	if err != nil {
		return fail(err)
	}
	if _, err := c.src.CreateTopic(r.Context(), f.Name, int32(partitions), int32(rf), settings); err != nil {
		return fail(err)
	}
	return view{}, Prefix + "/topics/" + url.PathEscape(f.Name), nil
}

// alterTopicPage is the alter form of a topic, its overrides filled in.
func (c *console) alterTopicPage(r *http.Request, v *viewer) (view, error) {
	name := r.PathValue("topic")
	desc, err := c.describeTopic(v, name)
	if err != nil {
		return view{}, err
	}
	keys := make([]string, 0, len(desc.Overrides))
	for k := range desc.Overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var lines []string
	for _, k := range keys {
		lines = append(lines, k+"="+desc.Overrides[k])
	}
	f := topicFormData{Name: name, Alter: true, Current: len(desc.Partitions), Partitions: strconv.Itoa(len(desc.Partitions)), Settings: strings.Join(lines, "\n")}
	return view{Template: "topic_form", Title: "Alter topic " + name, Nav: "topics", Data: f}, nil
}

// alterTopic applies the alter form: settings set and returned to their
// defaults, then a larger partition count.
func (c *console) alterTopic(r *http.Request, v *viewer) (view, string, error) {
	name := r.PathValue("topic")
	f := topicFormData{Name: name, Alter: true, Partitions: r.PostFormValue("partitions"), Settings: r.PostFormValue("settings"), Delete: r.PostFormValue("delete")}
	fail := func(err error) (view, string, error) {
		_, f.Message = refusal(err)
		return view{Template: "topic_form", Title: "Alter topic " + name, Nav: "topics", Data: f}, "", err
	}
	if err := v.may("console alter topic", broker.Needs(broker.TopicNeed(name, security.OpAdmin))); err != nil {
		return fail(err)
	}
	desc, err := c.src.DescribeTopic(name)
	if err != nil {
		return fail(err)
	}
	f.Current = len(desc.Partitions)
	set, err := parseSettings(f.Settings)
	if err != nil {
		return fail(err)
	}
	var del []string
	for _, k := range strings.FieldsFunc(f.Delete, func(r rune) bool { return r == '\n' || r == ',' || r == ' ' }) {
		del = append(del, k)
	}
	partitions, err := strconv.ParseInt(strings.TrimSpace(f.Partitions), 10, 32)
	if err != nil {
		return fail(badRequest("partitions %q: want a number", f.Partitions))
	}
	if int(partitions) < f.Current {
		return fail(badRequest("partitions %d: a topic's partitions can only be added to (it has %d)", partitions, f.Current))
	}
	// Settings that are already as asked are not sent: an alter that sets
	// only those is no change.
	for k, val := range set {
		if desc.Overrides[k] == val {
			delete(set, k)
		}
	}
	if len(set) > 0 || len(del) > 0 {
		if _, err := c.src.AlterTopicConfig(r.Context(), name, set, del); err != nil {
			return fail(err)
		}
	}
	if int(partitions) > f.Current {
		if _, err := c.src.AddPartitions(r.Context(), name, int32(partitions), nil); err != nil {
			return fail(err)
		}
	}
	return view{}, Prefix + "/topics/" + url.PathEscape(name), nil
}
