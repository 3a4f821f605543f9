package postgres

// ListSQL is the statement of a List whose span has an end.
func (s *Store) ListSQL() string { return s.sqlList }
