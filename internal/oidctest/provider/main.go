// Command provider runs oidctest's OpenID provider as a process, for the
// dashboard's browser tests (web/e2e): flags name its address, its client
// and the users' groups; it prints its issuer URL on stdout and serves until
// SIGTERM.
//
//	provider -addr 127.0.0.1:0 -client-id sundial -client-secret s3cret \
//	  -redirect http://127.0.0.1:8080/auth/callback -user ann=sundial-admins -user vera=staff
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sundialhq/sundial/internal/oidctest"
)

type users map[string]oidctest.User

func (u users) String() string { return "" }

// Set reads name=group+group.
func (u users) Set(v string) error {
	name, groups, _ := strings.Cut(v, "=")
	if name == "" {
		return fmt.Errorf("want name=group+group")
	}
	var gs []string
	if groups != "" {
		gs = strings.Split(groups, "+")
	}
	u[name] = oidctest.User{Name: strings.ToUpper(name[:1]) + name[1:], Email: name + "@example.com", Groups: gs}
	return nil
}

func main() {
	us := users{}
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	var c oidctest.Client
	flag.StringVar(&c.ID, "client-id", "sundial", "the client's id")
	flag.StringVar(&c.Secret, "client-secret", "", "the client's secret")
	flag.StringVar(&c.RedirectURI, "redirect", "", "the client's redirect URI")
	flag.Var(us, "user", "a user: name=group+group (repeatable)")
	flag.Parse()
	p, err := oidctest.Start(*addr, c, us)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(p.Issuer)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	_ = p.Close()
}
