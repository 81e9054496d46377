package deploycheck

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

// rulesFile is the one maintained copy of the alert rules (promtool checks
// and unit-tests it: make test-deploy); the chart serves a copy of it.
var (
	rulesFile      = filepath.Join(repo, "deploy/prometheus/sundial-rules.yaml")
	chartRulesFile = filepath.Join(chart, "files/sundial-rules.yaml")
)

// TestChartRulesAreTheRulesFile fails when the chart's copy of the rules
// differs from deploy/prometheus/sundial-rules.yaml by a byte: edit that
// file, then copy it over the chart's.
func TestChartRulesAreTheRulesFile(t *testing.T) {
	want, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(chartRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from %s; copy it: cp deploy/prometheus/sundial-rules.yaml deploy/helm/sundial/files/", chartRulesFile, rulesFile)
	}
}

// TestPrometheusRuleRendersTheRules: with prometheusRule.enabled the chart
// renders one PrometheusRule whose spec is the rules file, decoded strictly
// into the Prometheus Operator's types, with every alert's for, severity,
// summary, description and runbook_url.
func TestPrometheusRuleRendersTheRules(t *testing.T) {
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(b, &want); err != nil {
		t.Fatalf("%s as a PrometheusRule spec: %v", rulesFile, err)
	}
	r := render(t, "--set", "prometheusRule.enabled=true", "--set", "prometheusRule.labels.release=prometheus")
	if len(r.rules) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(r.rules))
	}
	pr := r.rules[0]
	if pr.Labels["release"] != "prometheus" || pr.Labels["app.kubernetes.io/name"] != "sundial" {
		t.Errorf("PrometheusRule labels %v, want the chart's and prometheusRule.labels", pr.Labels)
	}
	if !reflect.DeepEqual(pr.Spec, want) {
		t.Errorf("the rendered PrometheusRule's spec is not %s", rulesFile)
	}
	alerts := 0
	for _, g := range want.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" {
				continue
			}
			alerts++
			if rule.For == nil || *rule.For == "" {
				t.Errorf("%s: no for:", rule.Alert)
			}
			if s := rule.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", rule.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if rule.Annotations[a] == "" {
					t.Errorf("%s: no annotation %s", rule.Alert, a)
				}
			}
		}
	}
	if alerts == 0 {
		t.Error("no alerts in the rules file")
	}
}
