// Command api serves Sundial's HTTP API (docs/api.md): the REST routes,
// the live websocket stream, /metrics and the live view, on
// SUNDIAL_HTTP_ADDR, over the Redis of SUNDIAL_REDIS_URL.
package main

import (
	"context"
	"fmt"
	"net"

	"github.com/sundialhq/sundial/internal/service"
	"github.com/sundialhq/sundial/pkg/audit"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/httpapi"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/telemetry"
)

func main() {
	service.Main("api", func(ctx context.Context, env *service.Env) error {
		stopTracing, _, err := telemetry.Setup(ctx, "sundial-api", env.Log)
		if err != nil {
			return fmt.Errorf("tracing: %w", err)
		}
		defer stopTracing()
		c := env.Config
		// With SUNDIAL_HISTORY=off, History stays nil: GET /v1/jobs and a
		// job's events answer 503 and /readyz reports it as not configured.
		var hist history.Reader
		var auditStore *audit.Store
		if c.History {
			mc, err := history.Connect(c.MongoURI)
			if err != nil {
				return fmt.Errorf("SUNDIAL_MONGO_URI: %w", err)
			}
			defer mc.Disconnect(context.WithoutCancel(ctx))
			hist = history.NewStore(mc.Database(c.MongoDB), history.StoreOptions{Retention: c.HistoryRetention, Logger: env.Log})
			auditStore = audit.NewStore(mc.Database(c.MongoDB), audit.StoreOptions{Retention: c.AuditRetention, Logger: env.Log})
			go auditStore.RunJanitor(ctx)
		}
		// Without a history store the audit records go to the log
		// (httpapi's default sink) and GET /v1/audit answers 503.
		var auditSink audit.Sink
		var auditLog audit.Reader
		if auditStore != nil {
			auditSink, auditLog = auditStore, auditStore
		}

		var signIn *httpapi.OIDCConfig
		if c.OIDCIssuer != "" {
			roles, err := httpapi.ParseRoleMappings(c.OIDCRoles)
			if err != nil {
				return fmt.Errorf("SUNDIAL_OIDC_ROLES: %w", err)
			}
			signIn = &httpapi.OIDCConfig{Issuer: c.OIDCIssuer, ClientID: c.OIDCClientID, ClientSecret: c.OIDCClientSecret,
				RedirectURL: c.OIDCRedirectURL, RolesClaim: c.OIDCRolesClaim, Roles: roles, SessionSecret: []byte(c.SessionSecret),
				SessionIdle: c.SessionIdle, SessionMax: c.SessionMax}
		}

		shutdown := c.ShutdownTimeout
		if shutdown == 0 {
			shutdown = -1 // no wait; httpapi's zero value means its default
		}
		api, err := httpapi.New(httpapi.Config{
			Queue:             queue.New(env.Redis, env.EngineOptions()),
			History:           hist,
			APIKeys:           c.APIKeys,
			OIDC:              signIn,
			Audit:             auditSink,
			AuditLog:          auditLog,
			RateLimit:         c.RateLimit,
			AllowedOrigins:    c.AllowedOrigins,
			MaxBodyBytes:      c.MaxBodyBytes,
			MaxBatchBodyBytes: c.MaxBatchBodyBytes,
			ShutdownTimeout:   shutdown,
			RequestTimeout:    c.RequestTimeout,
			WorkerMaxAge:      3 * c.HeartbeatInterval,
			Logger:            env.Log,
		})
		if err != nil {
			return err
		}
		stopMetrics, _, err := telemetry.SetupMetrics(ctx, "sundial-api", api.Gatherer(), env.Log)
		if err != nil {
			return fmt.Errorf("metrics export: %w", err)
		}
		defer stopMetrics()
		ln, err := net.Listen("tcp", c.HTTPAddr)
		if err != nil {
			return fmt.Errorf("SUNDIAL_HTTP_ADDR: %w", err)
		}
		env.Log.Info("API listening", "url", "http://"+ln.Addr().String())
		return api.Run(ctx, ln)
	})
}
