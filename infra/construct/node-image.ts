import { CfnOutput } from 'aws-cdk-lib';
import { TarballImageAsset } from 'aws-cdk-lib/aws-ecr-assets';
import { Construct } from 'constructs';

export interface VpcLeaseNodeImageProps {
  /** The installer image archive `npm run image` writes (dist/vpc-lease-cni-image.tar). */
  readonly tarballFile: string;
}

/**
 * The node side's installer image, published to the account's ECR as a CDK asset (cdk-assets loads the OCI
 * archive with `docker load`, tags and pushes it on deploy). Its URI goes into the DaemonSet manifest:
 * `npm run -s daemonset -- <NodeImageUri>` renders it.
 */
export class VpcLeaseNodeImage extends Construct {
  readonly asset: TarballImageAsset;
  /** The pushed image's URI in the deployment's ECR repository (a token until deploy). */
  readonly imageUri: string;

  constructor(scope: Construct, id: string, props: VpcLeaseNodeImageProps) {
    super(scope, id);
    this.asset = new TarballImageAsset(this, 'Installer', { tarballFile: props.tarballFile });
    this.imageUri = this.asset.imageUri;
    new CfnOutput(this, 'NodeImageUri', {
      key: 'NodeImageUri',
      value: this.imageUri,
      description: 'vpc-lease-cni installer image: npm run -s daemonset -- <this> | kubectl apply -f -',
    });
  }
}
