//go:build !svz_nopostgres

package storeenv

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/supervaize/svz/core/store"
	"github.com/supervaize/svz/core/store/postgres"
)

const postgresExample = "postgres://user:password@host:5432/database"

func openPostgres(ctx context.Context, getenv func(string) string, set settings) (store.Store, error) {
	raw, err := setting(getenv, URL, "postgres", postgresExample)
	if err != nil {
		return nil, err
	}
	if err := checkURL(URL, raw); err != nil {
		return nil, err
	}
	table, err := tableSetting(getenv, "postgres", "")
	if err != nil {
		return nil, err
	}
	if table == "" {
		table = postgres.DefaultTable
	}
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		return nil, badURL("PostgreSQL", raw, postgresExample)
	}
	postgres.Configure(cfg, set.timeout)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: postgres: %w", URL, err)
	}
	// Ping first so that every later failure concerns the table, not the server.
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: cannot reach postgres at %s: %w", URL, postgres.Address(cfg), err)
	}
	s, err := postgres.New(ctx, pool, postgres.WithTable(table), postgres.WithTimeout(set.timeout))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Table, err)
	}
	return s, nil
}
