import { CfnOutput } from 'aws-cdk-lib';
import { Construct } from 'constructs';

export interface VpcLeaseNodeImageProps {
  /** The installer image as `npm run -s push-image` printed it: `registry/repository@sha256:…` (or `:tag`). */
  readonly imageUri: string;
}

/**
 * The node side's installer image, published beforehand by `npm run push-image` (skopeo, no Docker): the stack
 * only carries its URI to the operator as the output NodeImageUri, which `npm run -s daemonset -- <uri>` renders
 * into the DaemonSet. Nothing is built or pushed at deploy.
 */
export class VpcLeaseNodeImage extends Construct {
  readonly imageUri: string;

  constructor(scope: Construct, id: string, props: VpcLeaseNodeImageProps) {
    super(scope, id);
    this.imageUri = props.imageUri;
    new CfnOutput(this, 'NodeImageUri', {
      key: 'NodeImageUri',
      value: this.imageUri,
      description: 'vpc-lease-cni installer image: npm run -s daemonset -- <this> | kubectl apply -f -',
    });
  }
}
