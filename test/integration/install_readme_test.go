package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/example/platform-apiserver/test/framework"
)

// readmeCommands returns the shell commands of the README's code block
// marked <!-- install-test: name -->, one per command: lines continued with
// a backslash are joined, a here-document stays with its command.
func readmeCommands(t *testing.T, name string) []string {
	t.Helper()
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- install-test: " + regexp.QuoteMeta(name) + " -->\n```sh\n(.*?)```")
	m := re.FindSubmatch(b)
	if m == nil {
		t.Fatalf("README.md has no ```sh block marked <!-- install-test: %s -->", name)
	}
	return splitCommands(string(m[1]))
}

var heredoc = regexp.MustCompile(`<<-?'?"?(\w+)'?"?`)

func splitCommands(block string) []string {
	var cmds []string
	lines := strings.Split(block, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		cmd := line
		for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(cmd, "\\") + " " + strings.TrimSpace(lines[i])
		}
		if m := heredoc.FindStringSubmatch(cmd); m != nil {
			for i+1 < len(lines) {
				i++
				cmd += "\n" + lines[i]
				if lines[i] == m[1] {
					break
				}
			}
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// readmeMentions fails the test unless the README contains text verbatim,
// for commands the README gives in its prose.
func readmeMentions(t *testing.T, text string) {
	t.Helper()
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), text) {
		t.Fatalf("README.md no longer says %q, which the test runs", text)
	}
}

func TestSplitCommands(t *testing.T) {
	t.Parallel()
	got := splitCommands("a b \\\n  c\n# comment\n\ncat > f <<EOF\nx: $Y\nEOF\nd\n")
	want := []string{"a b  c", "cat > f <<EOF\nx: $Y\nEOF", "d"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("splitCommands = %q, want %q", got, want)
	}
}
