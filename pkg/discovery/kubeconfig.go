package discovery

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Member kubeconfigs are data (docs/security.md, "What the server trusts"):
// whoever can write the members Secret must not be able to make the server
// run a command or read one of its own files (its service account token)
// and send it to a server of their choosing. So a member kubeconfig may not
// use exec or auth-provider plugins, nor name files for its token,
// certificates or CA, unless Config.MemberAllowFilesAndPlugins says so.

// AllowFilesAndPluginsFlag is the flag that lets member kubeconfigs use
// plugins and files.
const AllowFilesAndPluginsFlag = "--member-kubeconfig-allow-files-and-plugins"

// refusedField is a setting of a member kubeconfig that is refused.
type refusedField struct {
	// Field names it as in the file, e.g. users["u"].tokenFile.
	Field string
	// Reason is the metric's reason label.
	Reason string
}

// refusedFields returns the settings of kc that would run a command or read
// a file, in a stable order: clusters, then users, each by name. Every entry
// counts, used by the current context or not.
func refusedFields(kc *clientcmdapi.Config) []refusedField {
	var out []refusedField
	add := func(kind, name, field, reason string) {
		out = append(out, refusedField{Field: fmt.Sprintf("%s[%q].%s", kind, name, field), Reason: reason})
	}
	for _, name := range slices.Sorted(maps.Keys(kc.Clusters)) {
		if c := kc.Clusters[name]; c != nil && c.CertificateAuthority != "" {
			add("clusters", name, "certificate-authority", "certificate_authority_file")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(kc.AuthInfos)) {
		u := kc.AuthInfos[name]
		if u == nil {
			continue
		}
		if u.Exec != nil {
			add("users", name, "exec", "exec")
		}
		if u.AuthProvider != nil {
			add("users", name, "auth-provider", "auth_provider")
		}
		if u.TokenFile != "" {
			add("users", name, "tokenFile", "token_file")
		}
		if u.ClientCertificate != "" {
			add("users", name, "client-certificate", "client_certificate_file")
		}
		if u.ClientKey != "" {
			add("users", name, "client-key", "client_key_file")
		}
	}
	return out
}

// errRefusedKubeconfig marks a member kubeconfig refused by the policy.
var errRefusedKubeconfig = errors.New("member kubeconfig refused")

// memberRESTConfig turns the kubeconfig file at path, whose content is data,
// into the member's client configuration. Unless allowFilesAndPlugins, it
// checks the kubeconfig as parsed before anything reads a file it names or
// runs a plugin, and refuses (errRefusedKubeconfig, with the fields) one
// that would. It never falls back to the in-cluster configuration.
func memberRESTConfig(path string, data []byte, allowFilesAndPlugins bool) (*rest.Config, []refusedField, error) {
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, nil, err
	}
	if !allowFilesAndPlugins {
		if refused := refusedFields(kc); len(refused) > 0 {
			fields := make([]string, len(refused))
			for i, r := range refused {
				fields[i] = r.Field
			}
			return nil, refused, fmt.Errorf("%w: %s would run a command or read a file of the server; "+
				"put the credentials inline (token, client-certificate-data, client-key-data, certificate-authority-data), "+
				"or start the server with %s", errRefusedKubeconfig, strings.Join(fields, ", "), AllowFilesAndPluginsFlag)
		}
	} else {
		// As clientcmd does for a file: relative paths are relative to it.
		for _, c := range kc.Clusters {
			c.LocationOfOrigin = path
		}
		for _, u := range kc.AuthInfos {
			u.LocationOfOrigin = path
		}
		if err := clientcmd.ResolveLocalPaths(kc); err != nil {
			return nil, nil, err
		}
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*kc, kc.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, nil, err
	}
	return cfg, nil, nil
}
