package awsapi

import (
	"fmt"
	"net/url"
	"strings"
)

// Region returns the region the environment sets: AWS_REGION (what Lambda sets), else
// AWS_DEFAULT_REGION; empty when neither is set.
func Region(getenv func(string) string) string {
	if r := strings.TrimSpace(getenv("AWS_REGION")); r != "" {
		return r
	}
	return strings.TrimSpace(getenv("AWS_DEFAULT_REGION"))
}

// resolveEndpoint returns the URL of svc in region: AWS_ENDPOINT_URL_<SERVICE>, else AWS_ENDPOINT_URL
// (both ignored when AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true), else the service's regional
// endpoint in the commercial, China and GovCloud partitions. Other partitions, FIPS and
// dual-stack endpoints need the URL set explicitly.
func resolveEndpoint(getenv func(string) string, svc Service, region string) (string, error) {
	if err := checkRegion(region); err != nil {
		return "", err
	}
	if !isTrue(getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")) {
		for _, name := range []string{svc.EndpointVariable(), "AWS_ENDPOINT_URL"} {
			if v := strings.TrimSpace(getenv(name)); v != "" {
				return checkURL(name, v)
			}
		}
	}
	for _, name := range []string{"AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT"} {
		if isTrue(getenv(name)) {
			return "", fmt.Errorf("%s is not supported: set %s to the endpoint to use", name, svc.EndpointVariable())
		}
	}
	partition, suffix := partitionOf(region)
	if suffix == "" {
		return "", fmt.Errorf("no known %s endpoint in partition %q: set %s", svc.Name, partition, svc.EndpointVariable())
	}
	return "https://" + svc.ID + "." + region + "." + suffix, nil
}

// partitionOf returns the partition of region and its DNS suffix, empty when the endpoints of
// that partition are not derived here.
func partitionOf(region string) (partition, dnsSuffix string) {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn", "amazonaws.com.cn"
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov", "amazonaws.com"
	case strings.HasPrefix(region, "us-isob-"):
		return "aws-iso-b", ""
	case strings.HasPrefix(region, "us-isof-"):
		return "aws-iso-f", ""
	case strings.HasPrefix(region, "us-iso-"):
		return "aws-iso", ""
	case strings.HasPrefix(region, "eu-isoe-"):
		return "aws-iso-e", ""
	case strings.HasPrefix(region, "eusc-"):
		return "aws-eusc", ""
	}
	return "aws", "amazonaws.com"
}

// checkRegion accepts region names (lower-case letters, digits, inner hyphens), which end up in
// a host name.
func checkRegion(region string) error {
	ok := region != "" && len(region) <= 63 && region[0] != '-' && region[len(region)-1] != '-'
	for i := 0; ok && i < len(region); i++ {
		c := region[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
	}
	if !ok {
		return fmt.Errorf("AWS region %q is not a region name (e.g. eu-west-3)", region)
	}
	return nil
}

// checkURL returns v, the value of the variable name, if it is an absolute http(s) URL.
func checkURL(name, v string) (string, error) {
	u, err := url.Parse(v)
	if err != nil {
		return "", fmt.Errorf("%s is not a URL", name)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s: %q is not an http(s) URL", name, ShownURL(u.String()))
	}
	return v, nil
}

func isTrue(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }
