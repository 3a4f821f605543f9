// Command hello is the yardstick of `make bench-lambda`: the smallest useful aws-lambda-go
// function, answering a Function URL request, built exactly like the controller's bootstrap.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(_ context.Context, _ events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		return events.LambdaFunctionURLResponse{
			StatusCode: 200,
			Headers:    map[string]string{"Content-Type": "text/plain; charset=utf-8"},
			Body:       "Hello, World!",
		}, nil
	})
}
