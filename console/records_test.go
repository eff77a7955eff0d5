package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/record"
)

// produceRecords appends recs to partition 0 of topic as one batch.
func produceRecords(t *testing.T, b *broker.Broker, topic string, recs ...record.Record) {
	t.Helper()
	bl := record.NewBuilder(record.DefaultBatchOptions())
	for _, r := range recs {
		bl.Add(r)
	}
	batch, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(t.Context(), broker.ProduceRequest{Topic: topic, Partition: 0, Batch: batch, Acks: broker.AcksAll}); err != nil {
		t.Fatal(err)
	}
}

// TestRecordsEscaped: keys, values and headers that are markup come out
// as text in every format, never as markup.
func TestRecordsEscaped(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "hostile", 1)
	now := time.Now().UnixMilli()
	produceRecords(t, b, "hostile", record.Record{Timestamp: now,
		Key:     []byte(`<script>alert("k")</script>`),
		Value:   []byte(`</pre><img src=x onerror=alert(1)>{"a":"<b>"}`),
		Headers: []record.Header{{Key: `<i onclick=x>`, Value: []byte(`"><svg onload=alert(2)>`)}}})
	srv := serveConsole(t, b, nil)
	c := client(t)
	for _, format := range []string{"text", "json", "hex"} {
		resp, body := get(t, c, srv.URL+"/ui/topics/hostile/partitions/0/records?mode=earliest&format="+format)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d\n%s", format, resp.StatusCode, body)
		}
		if !strings.Contains(body, `id="record-0"`) {
			t.Fatalf("%s: record 0 not shown:\n%s", format, body)
		}
		for _, bad := range []string{"<script>alert", "<img src=x", "<svg onload", "<i onclick", `"<b>"`} {
			if strings.Contains(body, bad) {
				t.Errorf("%s: %q went out as markup:\n%s", format, bad, body)
			}
		}
	}
	_, body := get(t, c, srv.URL+"/ui/topics/hostile/partitions/0/records?mode=earliest&format=text")
	for _, want := range []string{"&lt;script&gt;alert(&#34;k&#34;)&lt;/script&gt;", "&lt;/pre&gt;&lt;img src=x onerror=alert(1)&gt;", "&lt;i onclick=x&gt;", "&#34;&gt;&lt;svg onload=alert(2)&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("text: want %q escaped in the page:\n%s", want, body)
		}
	}
}

// TestRecordFormats: JSON is pretty-printed only when valid, hex shows
// every byte, text marks bytes that are not UTF-8, null is told apart
// from empty.
func TestRecordFormats(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "f", 1)
	now := time.Now().UnixMilli()
	produceRecords(t, b, "f",
		record.Record{Timestamp: now, Key: nil, Value: []byte(`{"id":7,"tags":["a","b"]}`)},
		record.Record{Timestamp: now, Key: []byte{}, Value: []byte("not json {")},
		record.Record{Timestamp: now, Key: []byte("k"), Value: []byte{0xff, 0xfe, 'A'}})
	srv := serveConsole(t, b, nil)
	c := client(t)
	_, js := get(t, c, srv.URL+"/ui/topics/f/partitions/0/records?mode=earliest&format=json")
	if !strings.Contains(js, "{\n  &#34;id&#34;: 7,\n  &#34;tags&#34;: [\n") {
		t.Errorf("json: record 0 not pretty-printed:\n%s", js)
	}
	if !strings.Contains(js, "not json {</pre>") || !strings.Contains(js, "(not JSON)") {
		t.Errorf("json: record 1 should show as text, marked not JSON:\n%s", js)
	}
	if !strings.Contains(js, `<td class="field key"><span class="muted">null</span>`) || !strings.Contains(js, `<td class="field key"><pre></pre>`) {
		t.Errorf("json: a null key and an empty key should differ:\n%s", js)
	}
	_, hx := get(t, c, srv.URL+"/ui/topics/f/partitions/0/records?mode=offset&offset=2&format=hex")
	if !strings.Contains(hx, "00000000  ff fe 41") || strings.Contains(hx, `id="record-1"`) {
		t.Errorf("hex from offset 2: want ff fe 41 and no record 1:\n%s", hx)
	}
	_, txt := get(t, c, srv.URL+"/ui/topics/f/partitions/0/records?mode=offset&offset=2&format=text")
	if !strings.Contains(txt, "\uFFFDA") || !strings.Contains(txt, "not UTF-8") {
		t.Errorf("text: bytes that are not UTF-8 should show replaced and marked:\n%s", txt)
	}
	for _, q := range []string{"format=xml", "mode=sideways", "mode=offset&offset=-1", "mode=time&time=yesterday", "records=0", "field_bytes=1"} {
		if resp, body := get(t, c, srv.URL+"/ui/topics/f/partitions/0/records?"+q); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400\n%s", q, resp.StatusCode, body)
		}
	}
}

// TestRecordLimits: a field is cut at the byte limit and says how much is
// not shown; a page stops at its record count and links the next page,
// which goes on where it stopped; seeking by time lands on the first
// record at or after it.
func TestRecordLimits(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "big", 1)
	base := time.Now().Add(-time.Hour).UnixMilli()
	var recs []record.Record
	for i := range 30 {
		recs = append(recs, record.Record{Timestamp: base + int64(i)*1000, Key: []byte("k"), Value: []byte(strings.Repeat("v", 5000))})
	}
	produceRecords(t, b, "big", recs...)
	srv := serveConsole(t, b, nil)
	c := client(t)
	_, body := get(t, c, srv.URL+"/ui/topics/big/partitions/0/records?mode=earliest&records=10&field_bytes=100")
	if !strings.Contains(body, "<pre>"+strings.Repeat("v", 100)+"</pre>") || strings.Contains(body, strings.Repeat("v", 101)) {
		t.Errorf("a 5000-byte value with field_bytes=100 should show 100 bytes:\n%s", body)
	}
	if !strings.Contains(body, "… 4900 more bytes of 5000") {
		t.Errorf("the cut should say what is not shown:\n%s", body)
	}
	if !strings.Contains(body, `id="record-9"`) || strings.Contains(body, `id="record-10"`) {
		t.Errorf("records=10 from the start: want offsets 0-9 only")
	}
	if !strings.Contains(body, `href="/ui/topics/big/partitions/0/records?field_bytes=100&amp;format=text&amp;mode=offset&amp;offset=10&amp;records=10"`) {
		t.Errorf("no link to the next page from offset 10:\n%s", body)
	}
	_, next := get(t, c, srv.URL+"/ui/topics/big/partitions/0/records?mode=offset&offset=10&records=10&field_bytes=100")
	if !strings.Contains(next, `id="record-10"`) || !strings.Contains(next, `id="record-19"`) || strings.Contains(next, `id="record-9"`) {
		t.Errorf("the next page should hold offsets 10-19")
	}
	// The page's byte budget: 200 records of 5000 bytes shown whole would be
	// ~1 MB; the page stops before 512 KiB.
	_, all := get(t, c, srv.URL+"/ui/topics/big/partitions/0/records?mode=earliest&records=200&field_bytes=65536")
	if len(all) > 600<<10 {
		t.Errorf("page of %d bytes, want the page budget to hold it near 512 KiB", len(all))
	}
	// By time: the record stamped base+20s is offset 20.
	at := time.UnixMilli(base + 20_000).UTC().Format(time.RFC3339Nano)
	_, byTime := get(t, c, srv.URL+"/ui/topics/big/partitions/0/records?mode=time&records=1&time="+at)
	if !strings.Contains(byTime, `id="record-20"`) || strings.Contains(byTime, `id="record-21"`) {
		t.Errorf("seek to %s: want offset 20 alone:\n%s", at, byTime)
	}
	// Latest follows the partition: polled twice a second.
	_, latest := get(t, c, srv.URL+"/ui/topics/big/partitions/0/records?records=5")
	if !strings.Contains(latest, `id="record-29"`) || !strings.Contains(latest, `id="record-25"`) || strings.Contains(latest, `id="record-24"`) || !strings.Contains(latest, `hx-trigger="every 500ms"`) {
		t.Errorf("latest 5: want offsets 25-29 and a poll every 500ms:\n%s", latest)
	}
}

// TestRecordsNeedRead: reading records needs read on the topic, as a
// fetch does; seeing it is not enough.
func TestRecordsNeedRead(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "public", 1)
	createTopic(t, b, "secret", 1)
	produceRecords(t, b, "secret", record.Record{Timestamp: time.Now().UnixMilli(), Value: []byte("classified")})
	f := newAuthFixture(t)
	srv := serveConsole(t, b, f.auth)
	c := client(t)
	bearer := []string{"Authorization", "Bearer " + f.alice}
	if resp, body := get(t, c, srv.URL+"/ui/topics/secret/partitions/0/records?mode=earliest", bearer...); resp.StatusCode != http.StatusForbidden || strings.Contains(body, "classified") {
		t.Errorf("alice on secret's records: %d, want 403 and nothing of them\n%s", resp.StatusCode, body)
	}
	if resp, _ := get(t, c, srv.URL+"/ui/topics/public/partitions/0/records", bearer...); resp.StatusCode != http.StatusOK {
		t.Errorf("alice on public's records: %d", resp.StatusCode)
	}
	_, body := get(t, c, srv.URL+"/ui/topics/secret/partitions/0/records?mode=earliest", "Authorization", "Bearer "+f.admin)
	if !strings.Contains(body, "classified") {
		t.Errorf("the superuser should read secret's records:\n%s", body)
	}
}
