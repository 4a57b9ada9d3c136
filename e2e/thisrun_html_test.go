package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cosmosloader/loader/internal/human"
)

// After a resume the HTML report, like the summary and the JSON, tells
// this run from the whole load.
func TestResumeHTMLReportShowsThisRun(t *testing.T) {
	t.Parallel()
	_, env := freshEnv(t)
	tg, _, ckpt := interrupted(t, env, syscall.SIGINT)
	html := filepath.Join(t.TempDir(), "r.html")
	res := runIn(t, env, "resume", ckpt, "--endpoint", tg.endpoint, "--key", tg.key, "--report-html", html)
	if res.code != 0 {
		t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
	}
	page := readText(t, html)
	i := strings.Index(page, `id="this-run"`)
	if i < 0 {
		t.Fatal("the HTML report has no this-run section after a resume")
	}
	if !strings.Contains(page[i:], "<th>This run</th><th>Whole load</th>") ||
		!strings.Contains(page[i:], "<td>Records committed</td>") || !strings.Contains(page[i:], "<td>"+human.Count(slowRecords)+"</td>") {
		t.Errorf("the this-run section does not compare this run with the whole load's %d records:\n%s", slowRecords, page[i:min(len(page), i+1500)])
	}
}
