package httpapi

// limitRoutes are the routes of a queue's limits (docs/flow-control.md).
func (s *Server) limitRoutes() []route {
	return nil
}
