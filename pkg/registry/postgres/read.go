package postgres

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

// sqlRegistryVersion reads the registry resourceVersion in a list's snapshot.
var sqlRegistryVersion = statement("read_registry_version")

// list reads one page in a REPEATABLE READ READ ONLY transaction, so the
// page and its resourceVersion come from one snapshot. Paging is keyset:
// the continue token carries the last key, and limit+1 rows tell whether
// more follow.
func list[T any](ctx context.Context, s *Store, spec *view[T], opts store.ListOptions) (*store.Page[T], error) {
	sel, err := selectorConds(opts)
	if err != nil {
		return nil, err
	}
	read := pageRead{limit: opts.Limit, fresh: opts.Freshness}
	var tok *continuetoken.Token
	if opts.Continue != "" {
		if tok, err = s.decodeContinue(ctx, spec.resource, opts.Continue); err != nil {
			return nil, err
		}
		read.after = &store.ListKey{tok.Key[0], tok.Key[1]}
		read.began = tok.ResourceVersion
		read.fresh.AtLeast = max(read.fresh.AtLeast, tok.ResourceVersion)
	}
	page, more, err := readPage(ctx, s, spec, sel, read)
	if err != nil {
		return nil, err
	}
	if tok != nil {
		// Like Kubernetes, every page of a list reports the first page's version.
		page.ResourceVersion = tok.ResourceVersion
	}
	if more {
		next := continuetoken.Token{Kind: spec.resource, ResourceVersion: page.ResourceVersion, IssuedAt: s.opts.Now()}
		if tok != nil {
			next.IssuedAt = tok.IssuedAt // the TTL bounds the whole list
		}
		last := spec.key(&page.Items[len(page.Items)-1])
		next.Key = last[:]
		codec, err := s.continueCodec(ctx)
		if err != nil {
			return nil, err
		}
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
func stream[T any](ctx context.Context, s *Store, spec *view[T], opts store.ListOptions, pageSize int, yield func(store.StreamPage[T]) error) error {
	sel, err := selectorConds(opts)
	if err != nil {
		return err
	}
	read := pageRead{limit: int64(pageSize), fresh: opts.Freshness}
	for {
		page, more, err := readPage(ctx, s, spec, sel, read)
		if err != nil {
			return err
		}
		if err := yield(store.StreamPage[T]{Items: page.Items, ResourceVersion: page.ResourceVersion, Final: !more}); err != nil {
			return err
		}
		if !more {
			return nil
		}
		last := spec.key(&page.Items[len(page.Items)-1])
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
	conds, err := selectorSQL(&sel.args, opts.Labels, opts.Fields)
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
func readPage[T any](ctx context.Context, s *Store, spec *view[T], sel filter, r pageRead) (page *store.Page[T], more bool, err error) {
	conds, args := sel.conds, slices.Clone(sel.args)
	if r.after != nil {
		conds = append(slices.Clip(conds), fmt.Sprintf("(%s, %s) > (%s, %s)", spec.order[0], spec.order[1], args.Add(r.after[0]), args.Add(r.after[1])))
	}
	query := spec.query(conds)
	if r.limit > 0 {
		// limit+1 rows tell whether more follow; a limit that large reads everything anyway.
		query += " LIMIT " + strconv.FormatInt(min(r.limit, math.MaxInt64-1)+1, 10)
	}
	page = &store.Page[T]{Items: []T{}}
	var raw *rawRows
	err = s.readTx(ctx, r.fresh, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, sqlRegistryVersion).Scan(&page.ResourceVersion); err != nil {
			return err
		}
		if r.began > 0 {
			// A list begun before a failover at a version the new primary
			// lacks cannot be continued consistently: 410, relist.
			var ep epoch
			if err := tx.QueryRow(ctx, sqlEpoch).Scan(&ep.lostAfter, &ep.floor); err != nil {
				return err
			}
			if ep.lost(r.began) {
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
		return nil, false, fmt.Errorf("list %s: %w", spec.resource, pgdb.InterpretError(err))
	}
	for i := range raw.values {
		item, err := spec.scan(raw.row(i))
		if err != nil {
			return nil, false, fmt.Errorf("list %s: %w", spec.resource, pgdb.InterpretError(err))
		}
		page.Items = append(page.Items, item)
	}
	if r.limit > 0 && int64(len(page.Items)) > r.limit {
		page.Items, more = page.Items[:r.limit], true
	}
	return page, more, nil
}

func (s *Store) decodeContinue(ctx context.Context, resource, token string) (*continuetoken.Token, error) {
	codec, err := s.continueCodec(ctx)
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
