package views

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/continuetoken"
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Reader is what a view's reads need of the store that holds the view.
type Reader interface {
	// Primary is the primary's pool for API reads; a get reads it.
	Primary() *pgdb.Pool
	// ReadTx runs fn in a REPEATABLE READ READ ONLY transaction (one
	// snapshot) on a server that holds f: a standby, or the primary's pool
	// for API reads. fn may run twice.
	ReadTx(ctx context.Context, f store.Freshness, fn func(pgx.Tx) error) error
	// Lost reports whether, as tx sees the registry, a failover lost
	// versions a client at rv may have seen.
	Lost(ctx context.Context, tx pgx.Tx, rv int64) (bool, error)
	// ContinueCodec returns the continue tokens' codec, which the store
	// keys with the registry's shared secret.
	ContinueCodec(ctx context.Context) (*continuetoken.Codec, error)
}

// sqlRegistryVersion reads the registry resourceVersion in a list's snapshot.
var sqlRegistryVersion = statement("read_registry_version")

// list reads one page in a REPEATABLE READ READ ONLY transaction, so the
// page and its resourceVersion come from one snapshot. Paging is keyset:
// the continue token carries the last key, and limit+1 rows tell whether
// more follow.
func list[T any](ctx context.Context, db Reader, spec *View[T], opts store.ListOptions) (*store.Page[T], error) {
	sel, err := selectorConds(opts)
	if err != nil {
		return nil, err
	}
	read := pageRead{limit: opts.Limit, fresh: opts.Freshness}
	var tok *continuetoken.Token
	if opts.Continue != "" {
		if tok, err = decodeContinue(ctx, db, spec.Resource, opts.Continue); err != nil {
			return nil, err
		}
		read.after = &store.ListKey{tok.Key[0], tok.Key[1]}
		read.began = tok.ResourceVersion
		read.fresh.AtLeast = max(read.fresh.AtLeast, tok.ResourceVersion)
	}
	page, more, err := readPage(ctx, db, spec, sel, read)
	if err != nil {
		return nil, err
	}
	if tok != nil {
		// Like Kubernetes, every page of a list reports the first page's version.
		page.ResourceVersion = tok.ResourceVersion
	}
	if more {
		codec, err := db.ContinueCodec(ctx)
		if err != nil {
			return nil, err
		}
		next := continuetoken.Token{Kind: spec.Resource, ResourceVersion: page.ResourceVersion, IssuedAt: codec.Now()}
		if tok != nil {
			next.IssuedAt = tok.IssuedAt // the TTL bounds the whole list
		}
		last := spec.Key(&page.Items[len(page.Items)-1])
		next.Key = last[:]
		if page.Continue, err = codec.Encode(next); err != nil {
			return nil, err
		}
	}
	return page, nil
}

// stream reads every row matching opts (Limit and Continue ignored) in
// keyset pages of pageSize, each with readPage in a short transaction of
// its own at least as fresh as the page before, and calls yield with each
// page once its transaction has ended: the database never waits on yield
// (a slow client).
func stream[T any](ctx context.Context, db Reader, spec *View[T], opts store.ListOptions, pageSize int, yield func(store.StreamPage[T]) error) error {
	sel, err := selectorConds(opts)
	if err != nil {
		return err
	}
	read := pageRead{limit: int64(pageSize), fresh: opts.Freshness}
	for {
		page, more, err := readPage(ctx, db, spec, sel, read)
		if err != nil {
			return err
		}
		if err := yield(store.StreamPage[T]{Items: page.Items, ResourceVersion: page.ResourceVersion, Final: !more}); err != nil {
			return err
		}
		if !more {
			return nil
		}
		last := spec.Key(&page.Items[len(page.Items)-1])
		read.after, read.began = &last, page.ResourceVersion
		read.fresh = store.Freshness{AtLeast: page.ResourceVersion}
	}
}

// filter is a list's selector conditions and their arguments.
type filter struct {
	conds []string
	args  pgdb.Args
}

func selectorConds(opts store.ListOptions) (filter, error) {
	var sel filter
	conds, err := SelectorSQL(&sel.args, opts.Labels, opts.Fields)
	if err != nil {
		return sel, fmt.Errorf("%w: %w", store.ErrInvalidSelector, err)
	}
	sel.conds = conds
	return sel, nil
}

// pageRead is which page readPage reads.
type pageRead struct {
	// after is the key the page starts after (nil: from the first).
	after *store.ListKey
	// limit caps the page; 0 reads everything.
	limit int64
	fresh store.Freshness
	// began is the version an earlier page of the same list was read at
	// (0: none), which a failover must not have lost.
	began int64
}

// readPage reads one keyset page of the rows matching sel and the
// registry's resourceVersion from one REPEATABLE READ READ ONLY snapshot,
// and decodes the rows once the transaction has ended; more tells that
// rows follow (limit+1 were found).
func readPage[T any](ctx context.Context, db Reader, spec *View[T], sel filter, r pageRead) (page *store.Page[T], more bool, err error) {
	conds, args := sel.conds, slices.Clone(sel.args)
	if r.after != nil {
		conds = append(slices.Clip(conds), fmt.Sprintf("(%s, %s) > (%s, %s)", spec.Order[0], spec.Order[1], args.Add(r.after[0]), args.Add(r.after[1])))
	}
	query := spec.query(conds)
	if r.limit > 0 {
		// limit+1 rows tell whether more follow; a limit that large reads everything anyway.
		query += " LIMIT " + strconv.FormatInt(min(r.limit, math.MaxInt64-1)+1, 10)
	}
	page = &store.Page[T]{Items: []T{}}
	var raw *rawRows
	err = db.ReadTx(ctx, r.fresh, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, sqlRegistryVersion).Scan(&page.ResourceVersion); err != nil {
			return err
		}
		if r.began > 0 {
			// A list begun before a failover at a version the new primary
			// lacks cannot be continued consistently: 410, relist.
			lost, err := db.Lost(ctx, tx, r.began)
			if err != nil {
				return err
			}
			if lost {
				return fmt.Errorf("%w: the list began at resourceVersion %d, which a failover of the registry database lost", store.ErrExpiredContinue, r.began)
			}
		}
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		raw, err = readRaw(rows)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("list %s: %w", spec.Resource, pgdb.InterpretError(err))
	}
	for i := range raw.values {
		item, err := spec.Scan(raw.row(i))
		if err != nil {
			return nil, false, fmt.Errorf("list %s: %w", spec.Resource, pgdb.InterpretError(err))
		}
		page.Items = append(page.Items, item)
	}
	if r.limit > 0 && int64(len(page.Items)) > r.limit {
		page.Items, more = page.Items[:r.limit], true
	}
	return page, more, nil
}

func decodeContinue(ctx context.Context, db Reader, resource, token string) (*continuetoken.Token, error) {
	codec, err := db.ContinueCodec(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := codec.Decode(token, resource)
	if err != nil {
		return nil, err
	}
	if len(tok.Key) != 2 {
		return nil, fmt.Errorf("%w: continue token is not valid for this list; restart the list without continue", store.ErrInvalidContinue)
	}
	return &tok, nil
}
