package options

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/example/platform-apiserver/pkg/apiserver"
	"github.com/example/platform-apiserver/pkg/registry"
)

// WatchOptions tune how watches follow the registry's change feed; the
// flags set the server's FeedConfig.
type WatchOptions struct {
	apiserver.FeedConfig
}

// NewWatchOptions returns the defaults (apiserver.DefaultFeedConfig).
func NewWatchOptions() *WatchOptions {
	return &WatchOptions{FeedConfig: apiserver.DefaultFeedConfig()}
}

// AddFlags adds the watch flags.
func (o *WatchOptions) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.PollInterval, "watch-poll-interval", o.PollInterval,
		"How often the change feed is read when no LISTEN/NOTIFY wake-up arrives; bounds event latency when notifications are lost.")
	fs.DurationVar(&o.BookmarkInterval, "watch-bookmark-interval", o.BookmarkInterval,
		"How often watches that set allowWatchBookmarks receive a bookmark.")
	fs.DurationVar(&o.HistoryRetention, "watch-history-retention", o.HistoryRetention,
		"How long changes stay in the registry's history; a watch resuming from an older resourceVersion gets 410 Gone and relists.")
	fs.DurationVar(&o.CompactionInterval, "watch-compaction-interval", o.CompactionInterval,
		"How often history older than --watch-history-retention is deleted.")
	fs.IntVar(&o.WatcherBuffer, "watch-buffer", o.WatcherBuffer,
		"How many events a watcher may fall behind before its stream is closed. The stream ends without an error event, as "+
			"kube-apiserver's watch cache ends a slow watcher's, so client-go resumes from the last resourceVersion it received "+
			"(no relist) as long as that is within --watch-history-retention.")
	fs.IntVar(&o.WindowChanges, "watch-window-changes", o.WindowChanges,
		"How many of the most recent changes each replica keeps in memory; a watch resuming within them reads no history from the database.")
	fs.DurationVar(&o.FeedReadTimeout, "watch-feed-read-timeout", o.FeedReadTimeout, ""+
		"How long one read of the registry's change feed may take before it is abandoned and retried on a new connection, "+
		"so a database that stops answering without closing its connections (a paused host, a failover that left the old "+
		"primary's sockets open) does not freeze every watch.")
	fs.DurationVar(&o.FeedMaxStaleness, "watch-feed-max-staleness", o.FeedMaxStaleness, ""+
		"How long the change feed may go without a completed read of the registry before the readiness check registry-feed "+
		"fails (watches would be silently stale).")
	fs.DurationVar(&o.MemberStaleAfter, "member-stale-after", o.MemberStaleAfter, ""+
		"How old a member's mirror heartbeat (ClusterCapacity status.mirroring.completeAsOf: up to when the registry holds every change "+
		"of the member, recorded about once a minute by its discovery owner) may be when it is read before the member is shown Stale "+
		"with its data age, whatever its recorded state: on its ClusterCapacity, in PlacementReports (stale: true) and in the data age "+
		"of its NodeCapacities and ClusterNamespaces. At least 2m (a healthy member's data age reaches about 2m: its watches' bookmarks "+
		"come once a minute, and the heartbeat is recorded once a minute), or 0 to never judge a member stale.")
	fs.IntVar(&o.WindowBytes, "watch-window-bytes", o.WindowBytes,
		"Upper bound of the memory (estimated bytes) the recent changes of --watch-window-changes may hold.")
}

// Validate returns every problem with the options.
func (o *WatchOptions) Validate() []error {
	var errs []error
	for name, d := range map[string]time.Duration{
		"--watch-poll-interval":       o.PollInterval,
		"--watch-bookmark-interval":   o.BookmarkInterval,
		"--watch-history-retention":   o.HistoryRetention,
		"--watch-compaction-interval": o.CompactionInterval,
		"--watch-feed-read-timeout":   o.FeedReadTimeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	if o.FeedMaxStaleness <= o.PollInterval {
		errs = append(errs, fmt.Errorf("--watch-feed-max-staleness must be longer than --watch-poll-interval (%s), got %s", o.PollInterval, o.FeedMaxStaleness))
	}
	if o.MemberStaleAfter != 0 && o.MemberStaleAfter < registry.MinMemberStaleAfter {
		errs = append(errs, fmt.Errorf("--member-stale-after must be 0 (never stale) or at least %s: a healthy member's data age reaches about 2m "+
			"(bookmarks and the heartbeat once a minute each), so a shorter bound shows healthy members Stale; got %s", registry.MinMemberStaleAfter, o.MemberStaleAfter))
	}
	if o.WatcherBuffer < 1 {
		errs = append(errs, fmt.Errorf("--watch-buffer must be at least 1, got %d", o.WatcherBuffer))
	}
	if o.WindowChanges < 1 {
		errs = append(errs, fmt.Errorf("--watch-window-changes must be at least 1, got %d", o.WindowChanges))
	}
	if o.WindowBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("--watch-window-bytes must be at least 1048576 (1 MiB), got %d", o.WindowBytes))
	}
	return errs
}

// ApplyTo sets the server's watch configuration.
func (o *WatchOptions) ApplyTo(c *apiserver.FeedConfig) {
	*c = o.FeedConfig
}
