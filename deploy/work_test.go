package deploy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/image"
)

// workImage is an image whose binary defines background work when work is set (the name of
// jobs.Define's instantiation is in its function table, as in a real build).
func workImage(work bool) func(context.Context, string) (v1.Image, error) {
	return func(_ context.Context, arch string) (v1.Image, error) {
		bin := "controller"
		if work {
			bin += "\x00github.com/supervaize/svz/core/jobs.Define[go.shape.struct {}]\x00"
		}
		return image.New(image.Spec{Binary: []byte(bin), Arch: arch, CACerts: []byte("ca"), Created: time.Unix(0, 0)})
	}
}

// TestAppRunnerRefusesBackgroundWork: plan, up and local of a controller with background work on
// App Runner fail before anything is contacted, naming the platforms that run it.
func TestAppRunnerRefusesBackgroundWork(t *testing.T) {
	for _, cmd := range []string{"plan", "up"} {
		d := &deploy.Deployer{
			Config:   deploy.Config{Platform: deploy.PlatformAppRunner, Name: "leads", Env: "dev"},
			Platform: deploy.Platform{Name: deploy.PlatformAppRunner}, // no clients: nothing may be called
			Getenv: func(k string) string {
				return map[string]string{"SUPERVAIZER_STORE": "postgres", "SUPERVAIZER_STORE_URL": "postgres://db.example.com/svz"}[k]
			},
			Image: workImage(true),
		}
		var err error
		if cmd == "plan" {
			_, err = d.Plan(context.Background())
		} else {
			_, err = d.Up(context.Background())
		}
		var se *deploy.StepError
		if !errors.As(err, &se) || se.Step != deploy.StepConfig || !errors.Is(err, deploy.ErrAppRunnerWork) {
			t.Fatalf("%s: %v", cmd, err)
		}
		if want := "background work needs a queue that pushes to the service: App Runner has none svz supports; deploy with --platform lambda or --platform cloud-run"; deploy.ErrAppRunnerWork.Error() != want {
			t.Fatalf("message %q", deploy.ErrAppRunnerWork)
		}
	}
}

func TestDefinesBackgroundWork(t *testing.T) {
	for _, work := range []bool{false, true} {
		img, err := workImage(work)(context.Background(), "amd64")
		if err != nil {
			t.Fatal(err)
		}
		bin, err := image.Binary(img)
		if err != nil || image.DefinesBackgroundWork(bin) != work {
			t.Fatalf("work %v: %v", work, err)
		}
	}
}
