package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/continuetoken"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// sqlRegistryVersion reads the registry resourceVersion in a list's snapshot.
var sqlRegistryVersion = statement("read_registry_version")

// listSpec describes how to list one view table.
type listSpec[T any] struct {
	kind    kind
	table   string
	columns string
	// order is the keyset: two key columns, bytewise (COLLATE "C") order.
	order [2]string
	scan  func(pgx.Row) (T, error)
	key   func(T) [2]string
}

// list reads one page in a REPEATABLE READ READ ONLY transaction, so the
// page and its resourceVersion come from one snapshot. Paging is keyset:
// the continue token carries the last key, and limit+1 rows tell whether
// more follow.
func list[T any](ctx context.Context, s *Store, spec listSpec[T], opts store.ListOptions) (*store.Page[T], error) {
	var args sqlArgs
	conds, err := selectorSQL(&args, opts.Labels, opts.Fields)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrInvalidSelector, err)
	}
	var tok *continuetoken.Token
	if opts.Continue != "" {
		if tok, err = s.decodeContinue(ctx, spec.kind, opts.Continue); err != nil {
			return nil, err
		}
		conds = append(conds, fmt.Sprintf("(%s, %s) > (%s, %s)", spec.order[0], spec.order[1], args.add(tok.Key[0]), args.add(tok.Key[1])))
	}
	query := spec.query(conds)
	if opts.Limit > 0 {
		// limit+1 rows tell whether more follow; a limit that large reads everything anyway.
		query += " LIMIT " + strconv.FormatInt(min(opts.Limit, math.MaxInt64-1)+1, 10)
	}

	fresh := opts.Freshness
	if tok != nil {
		fresh.AtLeast = max(fresh.AtLeast, tok.ResourceVersion)
	}
	page := &store.Page[T]{Items: []T{}}
	err = s.readTx(ctx, fresh, func(tx pgx.Tx) error {
		page.Items = page.Items[:0] // a retry on the primary starts over
		if err := tx.QueryRow(ctx, sqlRegistryVersion).Scan(&page.ResourceVersion); err != nil {
			return err
		}
		if tok != nil {
			// A list begun before a failover at a version the new primary
			// lacks cannot be continued consistently: 410, relist.
			var ep epoch
			if err := tx.QueryRow(ctx, sqlEpoch).Scan(&ep.lostAfter, &ep.floor); err != nil {
				return err
			}
			if ep.lost(tok.ResourceVersion) {
				return fmt.Errorf("%w: the list began at resourceVersion %d, which a failover of the registry database lost", store.ErrExpiredContinue, tok.ResourceVersion)
			}
		}
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			item, err := spec.scan(rows)
			if err != nil {
				return err
			}
			page.Items = append(page.Items, item)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", spec.kind.name, interpretError(err))
	}

	if tok != nil {
		// Like Kubernetes, every page of a list reports the first page's version.
		page.ResourceVersion = tok.ResourceVersion
	}
	if opts.Limit > 0 && int64(len(page.Items)) > opts.Limit {
		page.Items = page.Items[:opts.Limit]
		next := continuetoken.Token{Kind: spec.kind.name, ResourceVersion: page.ResourceVersion, IssuedAt: s.opts.Now()}
		if tok != nil {
			next.IssuedAt = tok.IssuedAt // the TTL bounds the whole list
		}
		last := spec.key(page.Items[len(page.Items)-1])
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

// query is the ordered SELECT of the spec's rows matching conds: assembled
// at run time from the selectors, so it stays in Go.
func (spec listSpec[T]) query(conds []string) string {
	query := "SELECT " + spec.columns + " FROM " + spec.table
	if len(conds) > 0 {
		query += " WHERE " + strings.Join(conds, " AND ")
	}
	return query + " ORDER BY " + spec.order[0] + ", " + spec.order[1]
}

// stream reads every row matching opts (Limit and Continue are ignored) from
// one REPEATABLE READ snapshot, as the rows arrive: it calls yield with the
// snapshot's resourceVersion and each page of up to pageSize items, so
// memory follows the page, not the table. yield may block (a slow client):
// the query then waits on its connection, which stays busy, not idle.
func stream[T any](ctx context.Context, s *Store, spec listSpec[T], opts store.ListOptions, pageSize int, yield func(rv int64, page []T) error) error {
	var args sqlArgs
	conds, err := selectorSQL(&args, opts.Labels, opts.Fields)
	if err != nil {
		return fmt.Errorf("%w: %w", store.ErrInvalidSelector, err)
	}
	var yieldErr error
	yielded := false
	err = s.readTx(ctx, opts.Freshness, func(tx pgx.Tx) error {
		err := streamRows(ctx, tx, spec.query(conds), args, spec.scan, pageSize, func(rv int64, page []T) error {
			yielded = true
			yieldErr = yield(rv, page)
			return yieldErr
		})
		if err != nil && yielded {
			return fmt.Errorf("%w: %w", errPassedOn, err)
		}
		return err
	})
	if yieldErr != nil && errors.Is(err, yieldErr) {
		return yieldErr
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", spec.kind.name, interpretError(err))
	}
	return nil
}

// streamRows runs query in tx and calls yield with the snapshot's
// resourceVersion and each page of up to pageSize rows, the last page
// (maybe empty) too: it carries the version.
func streamRows[T any](ctx context.Context, tx pgx.Tx, query string, args []any, scan func(pgx.Row) (T, error), pageSize int, yield func(rv int64, page []T) error) error {
	var rv int64
	if err := tx.QueryRow(ctx, sqlRegistryVersion).Scan(&rv); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	page := make([]T, 0, pageSize)
	for rows.Next() {
		item, err := scan(rows)
		if err != nil {
			return err
		}
		if page = append(page, item); len(page) == pageSize {
			if err := yield(rv, page); err != nil {
				return err
			}
			page = make([]T, 0, pageSize)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return yield(rv, page)
}

func (s *Store) decodeContinue(ctx context.Context, k kind, token string) (*continuetoken.Token, error) {
	codec, err := s.continueCodec(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := codec.Decode(token, k.name)
	if err != nil {
		return nil, err
	}
	if len(tok.Key) != 2 {
		return nil, fmt.Errorf("%w: continue token is not valid for this list; restart the list without continue", store.ErrInvalidContinue)
	}
	return &tok, nil
}
